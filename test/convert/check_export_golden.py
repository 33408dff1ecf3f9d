#!/usr/bin/env python3
"""Checks an ftmpi-convert export against committed golden logits (run by
test/convert/test_export_transformers.sh; needs torch, transformers, safetensors).

    python3 test/convert/check_export_golden.py [--golden EXPORT_DIR GOLDEN_JSON DTYPE]...
                                                [--greedy EXPORT_DIR PROMPT_IDS GEN_IDS]...

Runs every check given (in one process: importing torch and transformers costs
seconds) and reports each; exits 1 if any failed, 2 on a usage error.

--golden:

1. safetensors: every shard (model.safetensors, or those in
   model.safetensors.index.json) opens with safe_open, carries
   __metadata__ format = "pt", and the tensors are exactly the names and shapes a
   model of the export's config.json has (Llama, Qwen2's q/k/v biases, Qwen3's
   q/k norms), every one of dtype DTYPE
   (bf16 or fp32); an index maps each tensor to the shard that holds it and its
   metadata.total_size is the sum of the tensor bytes.
2. transformers: AutoModelForCausalLM.from_pretrained(EXPORT_DIR, dtype=torch.float32)
   is the class config.json's architectures names (LlamaForCausalLM,
   Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM), loads with no
   missing, unexpected or mismatched weights, and its logits on the
   golden file's token ids equal the golden logits (made from the source HF
   directory by gen_export_golden.py) within
   max |diff| <= GOLDEN_RTOL * max(1, max |golden|), GOLDEN_RTOL = 1e-5.
   float32 rounding accounts for ~3e-7 here (float64 vs float32, eager vs sdpa
   attention: <= 3.2e-7), so 1e-5 leaves 30x for other CPUs and versions; the tiny
   models' logits are small (max 1.24 and 0.52), and with 1e-4 doubling one fp32
   weight or halving rope_theta of tiny_bf16 went unnoticed or nearly so.

--greedy (a model trained by ftmpi and exported): GEN_IDS is what
ftmpi-generate --ids PROMPT_IDS produced greedily (comma-separated ids). The export
(fp32, from ftmpi's fp32 master weights) is checked as in 1, loaded as in 2, and run
on PROMPT_IDS + GEN_IDS (teacher-forced); at every generated position ftmpi's choice must be transformers' most likely token, up to a
near-tie: max(logits) - logits[choice] <= 1e-4 * max(1, max |logits|) (ftmpi's own
float32 kernels against torch's).

Prints the measured max |diff| (or logit gap) of each check, or MISMATCH and the
first problem it found.
"""
import json
import os
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import AutoModelForCausalLM

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
GOLDEN_RTOL = 1e-5   # logits vs golden, relative to max(1, max |golden|)
GREEDY_RTOL = 1e-4   # near-tie allowance between ftmpi-generate and transformers


class Mismatch(Exception):
    pass


def fail(msg):
    raise Mismatch(msg)


def expected_gpt_shapes(cfg):
    """GPTNeoXForCausalLM / GPTJForCausalLM names, as the hub stores them."""
    v = cfg["vocab_size"]
    if cfg["model_type"] == "gpt_neox":
        h, inter = cfg["hidden_size"], cfg["intermediate_size"]
        out = {"gpt_neox.embed_in.weight": (v, h), "gpt_neox.final_layer_norm.weight": (h,),
               "gpt_neox.final_layer_norm.bias": (h,), "embed_out.weight": (v, h)}
        for i in range(cfg["num_hidden_layers"]):
            p = f"gpt_neox.layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm"):
                out[p + n + ".weight"] = out[p + n + ".bias"] = (h,)
            out[p + "attention.query_key_value.weight"] = (3 * h, h)
            out[p + "attention.dense.weight"] = (h, h)
            if cfg.get("attention_bias", True):
                out[p + "attention.query_key_value.bias"] = (3 * h,)
                out[p + "attention.dense.bias"] = (h,)
            out.update({p + "mlp.dense_h_to_4h.weight": (inter, h),
                        p + "mlp.dense_h_to_4h.bias": (inter,),
                        p + "mlp.dense_4h_to_h.weight": (h, inter),
                        p + "mlp.dense_4h_to_h.bias": (h,)})
        return out
    h = cfg["n_embd"]
    inter = cfg.get("n_inner") or 4 * h
    out = {"transformer.wte.weight": (v, h), "transformer.ln_f.weight": (h,),
           "transformer.ln_f.bias": (h,), "lm_head.weight": (v, h), "lm_head.bias": (v,)}
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        out.update({p + "ln_1.weight": (h,), p + "ln_1.bias": (h,),
                    p + "mlp.fc_in.weight": (inter, h), p + "mlp.fc_in.bias": (inter,),
                    p + "mlp.fc_out.weight": (h, inter), p + "mlp.fc_out.bias": (h,)})
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out[p + "attn." + n + ".weight"] = (h, h)
    return out


def expected_shapes(cfg):
    if cfg["model_type"] in ("gpt_neox", "gptj"):
        return expected_gpt_shapes(cfg)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or h // nh
    family = cfg["model_type"]
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (nh * hd, h),
            p + "self_attn.k_proj.weight": (nkv * hd, h),
            p + "self_attn.v_proj.weight": (nkv * hd, h),
            p + "self_attn.o_proj.weight": (h, nh * hd),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
        })
        if family == "qwen2":
            out.update({p + "self_attn.q_proj.bias": (nh * hd,),
                        p + "self_attn.k_proj.bias": (nkv * hd,),
                        p + "self_attn.v_proj.bias": (nkv * hd,)})
        if family == "qwen3":
            out.update({p + "self_attn.q_norm.weight": (hd,),
                        p + "self_attn.k_norm.weight": (hd,)})
    if not cfg.get("tie_word_embeddings", False):
        out["lm_head.weight"] = (v, h)
    return out


def check_safetensors(d, dtype):
    cfg = json.load(open(os.path.join(d, "config.json")))
    want = expected_shapes(cfg)
    idx_path = os.path.join(d, "model.safetensors.index.json")
    index = json.load(open(idx_path)) if os.path.exists(idx_path) else None
    files = sorted(set(index["weight_map"].values())) if index else ["model.safetensors"]
    seen, nbytes = {}, 0
    for f in files:
        with safe_open(os.path.join(d, f), framework="pt") as h:
            meta = h.metadata() or {}
            if meta.get("format") != "pt":
                fail(f"{f}: __metadata__ format is {meta.get('format')!r}, not 'pt'")
            for k in h.keys():
                if k in seen:
                    fail(f"{k} is in both {seen[k]} and {f}")
                seen[k] = f
                t = h.get_tensor(k)
                if t.dtype != dtype:
                    fail(f"{f}: {k} has dtype {t.dtype}, expected {dtype}")
                if k in want and tuple(t.shape) != want[k]:
                    fail(f"{f}: {k} has shape {tuple(t.shape)}, expected {want[k]}")
                if index and index["weight_map"].get(k) != f:
                    fail(f"index maps {k} to {index['weight_map'].get(k)}, but it is in {f}")
                nbytes += t.numel() * t.element_size()
    if set(seen) != set(want):
        fail(f"tensor names differ from the config's: missing {sorted(set(want) - set(seen))}, "
             f"extra {sorted(set(seen) - set(want))}")
    if index:
        if set(index["weight_map"]) != set(seen):
            fail("index weight_map names differ from the shards' tensors")
        if index.get("metadata", {}).get("total_size") != nbytes:
            fail(f"index total_size {index.get('metadata', {}).get('total_size')} != {nbytes}")
    print(f"safetensors: {len(files)} file(s), {len(seen)} tensors, all {dtype}, format=pt")


def load(d):
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                       output_loading_info=True)
    arch = json.load(open(os.path.join(d, "config.json")))["architectures"][0]
    if type(model).__name__ != arch:
        fail(f"from_pretrained({d}) built {type(model).__name__}, config.json names {arch}")
    for what in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        if info.get(what):
            fail(f"from_pretrained({d}): {what} {sorted(info[what])}")
    return model.eval()


def check_logits(d, golden_path):
    g = json.load(open(golden_path))
    if g.get("format") != "ftmpi-export-golden" or g.get("version") != 1:
        fail(f"{golden_path}: not a version 1 golden file")
    golden = torch.tensor(g["logits"], dtype=torch.float32).reshape(g["shape"])
    ids = torch.tensor(g["ids"], dtype=torch.long)
    model = load(d)
    with torch.no_grad():
        logits = model(ids).logits.float()
    if tuple(logits.shape) != tuple(golden.shape):
        fail(f"logits shape {tuple(logits.shape)}, golden {tuple(golden.shape)}")
    diff = (logits - golden).abs().max().item()
    scale = max(1.0, golden.abs().max().item())
    tol = GOLDEN_RTOL * scale
    print(f"logits: shape {tuple(logits.shape)}, max |diff| vs golden = {diff:.3e} "
          f"(tolerance {tol:.1e}; golden from transformers {g.get('transformers')}, "
          f"running {transformers.__version__})")
    if not diff <= tol:  # also catches NaN
        fail(f"logits differ from {os.path.basename(golden_path)} by {diff:.3e} > {tol:.1e}")


def check_greedy(d, prompt, gen):
    prompt = [int(x) for x in prompt.split(",")]
    gen = [int(x) for x in gen.split(",")]
    if not prompt or not gen:
        fail("empty prompt or generation")
    model = load(d)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + gen], dtype=torch.long)).logits.float()[0]
    worst, same = 0.0, 0
    for t, choice in enumerate(gen):
        row = logits[len(prompt) - 1 + t]
        gap = (row.max() - row[choice]).item()
        tol = GREEDY_RTOL * max(1.0, row.abs().max().item())
        same += int(row.argmax().item() == choice)
        worst = max(worst, gap)
        if not gap <= tol:
            fail(f"generated token {t} ({choice}): transformers prefers "
                 f"{row.argmax().item()} by {gap:.3e} > {tol:.1e}")
    print(f"greedy: {len(gen)} tokens, transformers' argmax = ftmpi's choice at {same}, "
          f"max logit gap {worst:.3e}")


def main():
    args, jobs = sys.argv[1:], []
    while len(args) >= 4 and args[0] in ("--golden", "--greedy"):
        if args[0] == "--golden" and args[3] not in DTYPES:
            break
        jobs.append(args[:4])
        args = args[4:]
    if args or not jobs:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    failed = 0
    for kind, d, a, b in jobs:
        print(f"== {kind[2:]} {d}")
        try:
            if kind == "--golden":
                check_safetensors(d, DTYPES[b])
                check_logits(d, a)
            else:
                check_safetensors(d, torch.float32)
                check_greedy(d, a, b)
            print("OK")
        except Mismatch as e:
            print(f"MISMATCH: {e}")
            failed += 1
    print(f"{len(jobs) - failed} of {len(jobs)} exports ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
