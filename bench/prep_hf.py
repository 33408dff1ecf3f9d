#!/usr/bin/env python3
"""HF `tokenizers` peer of ftmpi-prep for bench/prep.sh: the same Alpaca rendering (doc/prep.md)
and tokenization (prompt and response apart, special-token parsing off), with batch encoding.

Usage: RAYON_NUM_THREADS=N python3 bench/prep_hf.py TOKENIZER.json CORPUS.jsonl
Prints one line: tokens=<n> seconds=<s> tokens_per_s=<r> (read + render + encode, like the
tokenize phase that ftmpi-prep reports).
"""
import json
import sys
import time

from tokenizers import Tokenizer

P_IN = ("Below is an instruction that describes a task, paired with an input that provides further "
        "context. Write a response that appropriately completes the request.\n\n"
        "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
P_NO = ("Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    tok.encode_special_tokens = True
    t0 = time.perf_counter()
    prompts, outputs = [], []
    with open(sys.argv[2], encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            tpl = P_IN if r.get("input") else P_NO
            prompts.append(tpl.replace("{instruction}", r["instruction"]).replace("{input}", r.get("input", "")))
            outputs.append(r["output"])
    n = 0
    for i in range(0, len(prompts), 4096):
        enc = tok.encode_batch(prompts[i:i + 4096] + outputs[i:i + 4096], add_special_tokens=False)
        n += sum(len(e.ids) for e in enc) + 2 * min(4096, len(prompts) - i)  # + BOS, EOS
    dt = time.perf_counter() - t0
    print("tokens=%d seconds=%.3f tokens_per_s=%.0f" % (n, dt, n / dt))


if __name__ == "__main__":
    main()
