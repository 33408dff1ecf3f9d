#!/usr/bin/env python3
"""Writes the tiny Hugging Face Llama directories that test/convert uses.

Developer tool, not run by `make check` (the outputs are committed under
test/data/convert/). Needs torch, transformers and safetensors from pip:

    python3 test/convert/gen_hf_dir.py test/data/convert

Two models, saved with save_pretrained and a small max_shard_size so that each is
split over several shards with a model.safetensors.index.json:

  tiny_bf16/    bfloat16, tied embeddings, Llama 3.1-style rope_scaling, eos list
  tiny_fp32/    float32, untied (lm_head.weight), no rope_scaling, GQA
  tiny_qwen2/   Qwen2ForCausalLM, bfloat16, tied, q/k/v biases
  tiny_qwen3/   Qwen3ForCausalLM, float32, untied, q/k norms, head_dim 24 (not 64/4)
  tiny_mistral/ MistralForCausalLM, bfloat16, untied, sliding_window 8
  tiny_neox/    GPTNeoXForCausalLM, bfloat16, parallel residual, rotary_pct 0.25, fused
                query_key_value; the head saved as embed_out.weight (the hub's name;
                transformers 5 writes lm_head.weight)
  tiny_gptj/    GPTJForCausalLM, float32, rotary_dim 8, lm_head bias

    python3 test/convert/gen_hf_dir.py test/data/convert tiny_qwen2 ...   # only these

The weights are random (seeded), so the files are small and reproducible for a
given torch version; the tests only need them to be valid HF checkpoints.
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (GPTJConfig, GPTJForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)


def build(out_dir, dtype, tied, llama3_rope, max_shard_size, seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_theta=500000.0 if llama3_rope else 10000.0,
        tie_word_embeddings=tied,
        bos_token_id=1,
        eos_token_id=[2, 3] if llama3_rope else 2,
        rope_scaling=(
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            }
            if llama3_rope
            else None
        ),
    )
    save(LlamaForCausalLM(cfg), out_dir, dtype, max_shard_size)


def save(model, out_dir, dtype, max_shard_size):
    # Norm weights are initialised to exactly 1 and biases to 0: perturb them so a
    # mix-up shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    model = model.to(dtype)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, max_shard_size=max_shard_size, safe_serialization=True)
    # generation_config.json is not needed by the tests; keep the fixtures minimal.
    gen = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)


SHAPE = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
             rms_norm_eps=1e-6, rope_theta=1000000.0, bos_token_id=1, eos_token_id=2)


def build_family(out_dir, config_cls, model_cls, dtype, tied, max_shard_size, seed, **extra):
    torch.manual_seed(seed)
    cfg = config_cls(tie_word_embeddings=tied, **SHAPE, **extra)
    save(model_cls(cfg), out_dir, dtype, max_shard_size)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "test/data/convert"
    only = sys.argv[2:]
    want = lambda name: not only or name in only
    if want("tiny_bf16"):
        build(os.path.join(root, "tiny_bf16"), torch.bfloat16, True, True, "80KB", 11)
    if want("tiny_fp32"):
        build(os.path.join(root, "tiny_fp32"), torch.float32, False, False, "150KB", 12)
    if want("tiny_qwen2"):
        build_family(os.path.join(root, "tiny_qwen2"), Qwen2Config, Qwen2ForCausalLM,
                     torch.bfloat16, True, "80KB", 13, use_sliding_window=False)
    if want("tiny_qwen3"):
        build_family(os.path.join(root, "tiny_qwen3"), Qwen3Config, Qwen3ForCausalLM,
                     torch.float32, False, "150KB", 14, head_dim=24, use_sliding_window=False,
                     attention_bias=False)
    if want("tiny_mistral"):
        build_family(os.path.join(root, "tiny_mistral"), MistralConfig, MistralForCausalLM,
                     torch.bfloat16, False, "80KB", 15, sliding_window=8)
    main_gpt(root, want)


def rename_neox_head(out_dir):
    """lm_head.weight -> embed_out.weight in the shards and the index, as on the hub."""
    import json
    idx = os.path.join(out_dir, "model.safetensors.index.json")
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    for f in files:
        t = load_file(os.path.join(out_dir, f))
        if "lm_head.weight" in t:
            t["embed_out.weight"] = t.pop("lm_head.weight")
            save_file(t, os.path.join(out_dir, f), metadata={"format": "pt"})
    if os.path.exists(idx):
        j = json.load(open(idx))
        wm = j["weight_map"]
        if "lm_head.weight" in wm:
            wm["embed_out.weight"] = wm.pop("lm_head.weight")
        j["weight_map"] = dict(sorted(wm.items()))
        json.dump(j, open(idx, "w"), indent=2)


def main_gpt(root, want):
    if want("tiny_neox"):
        d = os.path.join(root, "tiny_neox")
        torch.manual_seed(16)
        cfg = GPTNeoXConfig(vocab_size=96, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4,
                            max_position_embeddings=128, rotary_pct=0.25, rotary_emb_base=10000,
                            use_parallel_residual=True, hidden_act="gelu", bos_token_id=1,
                            eos_token_id=2, tie_word_embeddings=False)
        save(GPTNeoXForCausalLM(cfg), d, torch.bfloat16, "80KB")
        rename_neox_head(d)
    if want("tiny_gptj"):
        torch.manual_seed(17)
        cfg = GPTJConfig(vocab_size=96, n_embd=64, n_inner=128, n_layer=2, n_head=4,
                         n_positions=128, rotary_dim=8, activation_function="gelu_new",
                         bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
        save(GPTJForCausalLM(cfg), os.path.join(root, "tiny_gptj"), torch.float32, "150KB")


if __name__ == "__main__":
    main()
