#!/usr/bin/env python3
"""Writes the golden logits that test/convert/test_export_transformers.sh checks.

Developer tool, not run by `make check` (the outputs are committed under
test/data/convert/). Needs torch and transformers from pip:

    python3 test/convert/gen_export_golden.py test/data/convert

For each committed tiny Hugging Face directory (tiny_bf16, tiny_fp32 and the
families' tiny_qwen2, tiny_qwen3, tiny_mistral, tiny_neox, tiny_gptj), loads it with transformers'
AutoModelForCausalLM.from_pretrained(dir, dtype=torch.float32), runs a
fixed 2x16 batch of token ids (stored in the golden file) and writes the float32
logits to test/data/convert/<model>.logits.json:

    {"format": "ftmpi-export-golden", "version": 1, "model": "tiny_bf16",
     "torch": ..., "transformers": ..., "dtype": "float32",
     "ids": [[...16 ids...], [...]], "shape": [2, 16, vocab],
     "logits": [flat list, row-major, each value printed with 9 significant
                digits, so it parses back to the same float32]}

The golden logits come from the SOURCE directories, never from an ftmpi export, so
the test compares ftmpi-convert's output against an independent reference.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

MODELS = ("tiny_bf16", "tiny_fp32", "tiny_qwen2", "tiny_qwen3", "tiny_mistral", "tiny_neox",
          "tiny_gptj")
BATCH, SEQ = 2, 16


def fixed_ids(vocab):
    # Deterministic and independent of torch's RNG: a simple LCG over the vocab,
    # starting each row with bos (1) like a real prompt would.
    ids, x = [], 12345
    for _ in range(BATCH):
        row = [1]
        while len(row) < SEQ:
            x = (1103515245 * x + 12345) % (1 << 31)
            row.append(x % vocab)
        ids.append(row)
    return ids


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "test/data/convert"
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    only = sys.argv[2:]  # model names to (re)generate; all without
    for name in MODELS:
        if only and name not in only:
            continue
        model = AutoModelForCausalLM.from_pretrained(os.path.join(root, name),
                                                     dtype=torch.float32).eval()
        vocab = model.config.vocab_size
        ids = fixed_ids(vocab)
        with torch.no_grad():
            logits = model(torch.tensor(ids, dtype=torch.long)).logits.float()
        assert tuple(logits.shape) == (BATCH, SEQ, vocab)
        flat = [float(f"{v:.9g}") for v in logits.reshape(-1).tolist()]
        doc = {
            "format": "ftmpi-export-golden",
            "version": 1,
            "model": name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "dtype": "float32",
            "ids": ids,
            "shape": [BATCH, SEQ, vocab],
        }
        out = os.path.join(root, f"{name}.logits.json")
        with open(out, "w") as f:
            # header fields one per line, the logits 16 per line: small and diffable
            f.write("{\n" + "".join(f" {json.dumps(k)}: {json.dumps(v)},\n"
                                     for k, v in doc.items()))
            lines = [", ".join(f"{v:.9g}" for v in flat[i:i + 16])
                     for i in range(0, len(flat), 16)]
            f.write(' "logits": [\n' + ",\n".join(lines) + "\n ]\n}\n")
        # the file parses back to the same float32 values
        with open(out) as f:
            back = torch.tensor(json.load(f)["logits"], dtype=torch.float32)
        assert torch.equal(back, logits.reshape(-1)), f"{out}: values do not round-trip"
        print(f"{out}: {len(flat)} logits, max |logit| {logits.abs().max().item():.4f}, "
              f"{os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
