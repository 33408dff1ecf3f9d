#!/usr/bin/env python3
"""Developer check (not run by `make check`): an exported directory loads in
transformers and gives the same logits as the source model.

    python3 test/convert/check_export_hf.py SOURCE_HF_DIR EXPORTED_DIR

Loads both with LlamaForCausalLM.from_pretrained (float32 compute), runs the same
random token batch, and compares logits; also compares every tensor with the
safetensors library. Exits 1 on a mismatch. Needs torch, transformers, safetensors.
"""
import json
import os
import sys

import torch
from safetensors import safe_open
from transformers import LlamaForCausalLM


def tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = (sorted(set(json.load(open(idx))["weight_map"].values()))
             if os.path.exists(idx) else ["model.safetensors"])
    out = {}
    for f in files:
        with safe_open(os.path.join(d, f), framework="pt") as h:
            assert h.metadata().get("format") == "pt", f"{f}: no format=pt metadata"
            for k in h.keys():
                out[k] = h.get_tensor(k)
    return out


def main():
    src, exp = sys.argv[1], sys.argv[2]
    a, b = tensors(src), tensors(exp)
    assert set(a) == set(b), f"tensor sets differ: {set(a) ^ set(b)}"
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), f"tensor {k} differs"
    print(f"safetensors: {len(a)} tensors identical")
    m1 = LlamaForCausalLM.from_pretrained(src, dtype=torch.float32).eval()
    m2 = LlamaForCausalLM.from_pretrained(exp, dtype=torch.float32).eval()
    torch.manual_seed(0)
    ids = torch.randint(0, m1.config.vocab_size, (2, 24))
    with torch.no_grad():
        l1 = m1(ids).logits
        l2 = m2(ids).logits
    diff = (l1 - l2).abs().max().item()
    print(f"logits: shape {tuple(l1.shape)}, max |diff| = {diff:.3e}")
    if diff != 0.0:
        print("MISMATCH")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
