#!/usr/bin/env python3
"""PEFT reference checks for ftmpi-convert's adapter export and merge
(test/convert/test_peft.sh). Needs torch, transformers and peft (reference tools
from pip, never a run-time dependency of ftmpi).

  check_peft.py make FAMILY DIR
      DIR/base: a tiny float32 HF model (llama or gpt_neox, seeded); DIR/peft: a
      PEFT LoRA adapter on every projection of the family with random non-zero A and
      B (seeded), saved with save_pretrained
  check_peft.py adapter BASE REF EXPORTED
      PeftModel.from_pretrained(BASE, EXPORTED) gives the logits of
      PeftModel.from_pretrained(BASE, REF) (max abs difference <= 1e-5), and the
      adapter changes the base's logits (so an adapter lost on the way would fail)
  check_peft.py merged BASE REF MERGED
      AutoModelForCausalLM.from_pretrained(MERGED) gives the logits of
      PeftModel.from_pretrained(BASE, REF) (<= 1e-5)
  check_peft.py greedy BASE REF PROMPT_IDS GENERATED_IDS
      each generated id (ftmpi-generate on the LoRA checkpoint) is PEFT's greedy choice
      after the prompt and the ids before it (teacher-forced, so that one near-tie
      cannot derail the rest; a choice within 1e-4 of the top logit passes)
"""
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (AutoModelForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM)

TOL = 1e-5
TARGETS = {
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gpt_neox": ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
}


def make(family, out):
    torch.manual_seed(11)
    if family == "llama":
        cfg = LlamaConfig(vocab_size=259, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=128, tie_word_embeddings=False,
                          bos_token_id=1, eos_token_id=2)
        model = LlamaForCausalLM(cfg)
    else:
        cfg = GPTNeoXConfig(vocab_size=259, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4,
                            max_position_embeddings=128, rotary_pct=0.25,
                            use_parallel_residual=True, tie_word_embeddings=False,
                            bos_token_id=1, eos_token_id=2)
        model = GPTNeoXForCausalLM(cfg)
    model = model.float().eval()
    model.save_pretrained(f"{out}/base", safe_serialization=True)
    lcfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS[family],
                      task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lcfg)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:  # PEFT starts B at zero: give it values
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    peft_model.save_pretrained(f"{out}/peft", safe_serialization=True)


def ids():
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 259, (2, 16), generator=g)


def logits(model):
    with torch.no_grad():
        return model(input_ids=ids()).logits.float()


def base_model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def peft_logits(base, adapter):
    return logits(PeftModel.from_pretrained(base_model(base), adapter).eval())


def compare(what, got, want):
    diff = (got - want).abs().max().item()
    print(f"{what}: max |diff| {diff:.3g}")
    if not diff <= TOL:
        print(f"FAIL: {what}: max |diff| {diff} > {TOL}")
        return 1
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "make":
        make(argv[1], argv[2])
        return 0
    if len(argv) == 4 and argv[0] == "adapter":
        base, ref, exported = argv[1:]
        want = peft_logits(base, ref)
        plain = logits(base_model(base))
        moved = (want - plain).abs().max().item()
        print(f"adapter moves the base's logits by up to {moved:.3g}")
        if moved < 1e-2:
            print("FAIL: the reference adapter does not change the logits; the check is void")
            return 1
        return compare("PEFT on the exported adapter vs the original", peft_logits(base, exported),
                       want)
    if len(argv) == 4 and argv[0] == "merged":
        base, ref, merged = argv[1:]
        return compare("merged model vs PEFT base + adapter", logits(base_model(merged)),
                       peft_logits(base, ref))
    if len(argv) == 5 and argv[0] == "greedy":
        base, ref = argv[1:3]
        prompt = [int(x) for x in argv[3].split(",")]
        got = [int(x) for x in argv[4].split(",")]
        model = PeftModel.from_pretrained(base_model(base), ref).eval()
        with torch.no_grad():
            out = model(input_ids=torch.tensor([prompt + got])).logits[0].float()
        for i, tok in enumerate(got):
            row = out[len(prompt) + i - 1]
            if row[tok] < row.max() - 1e-4:
                print(f"FAIL: generated id {i} is {tok}, PEFT's greedy choice "
                      f"{int(row.argmax())} (logits {float(row[tok]):.6g} < {float(row.max()):.6g})")
                return 1
        print(f"greedy: {len(got)} ids are PEFT's choices")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
