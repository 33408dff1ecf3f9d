#!/usr/bin/env python3
"""Goldens of every family's special tokens as transformers reads them, and a tokenizer
directory in transformers 5's layout.

Reference tool only (pip transformers + tokenizers; generated with transformers 5.24.0,
tokenizers 0.23.3), never a run-time dependency. Deterministic. Run from anywhere:

    python3 test/tokenizer/gen_special_tokens.py

1. test/data/tokenizers/smollm2-t5/: what transformers 5's save_pretrained writes for the
   tiny tokenizer with SmolLM2's pipeline and SmolLM2-Instruct's chat_template
   (test/data/tokenizers/families/digits/): tokenizer.json, a tokenizer_config.json without
   the template, and chat_template.jinja. Its apply_chat_template ids are those of
   test/generate/test_generate_cli_smollm2.jsonl line 1 (asserted below), so the existing
   goldens of prep and generate hold for it.
2. test/tokenizer/golden_special_tokens.jsonl: per directory, AutoTokenizer's
   bos_token_id, eos_token_id, pad_token_id (None as -1) and the ids of "hi" encoded with
   add_special_tokens=True (what the tokenizer puts around a text: a BOS or nothing).
   test/tokenizer/special_tokens.sh compares `ftmpi-tok info` and
   `ftmpi-generate --template none --prompt-ids hi` with them.
"""
import json
import os
import shutil

from transformers import AutoTokenizer

import real_tokenizers  # the real tokenizers' tokenizer.json is committed as .xz

HERE = os.path.dirname(os.path.abspath(__file__))
TOK = os.path.join(HERE, "..", "data", "tokenizers")
DIRS = ["llama2", "llama3", "llama3.1", "qwen3", "smollm2-t5", "families/qwen2",
        "families/mistral", "families/gpt-neox", "families/gpt-j", "families/digits"]
SMOLLM2_PROMPT = "Hello, naïve 12 世界 x1y22"


def write_smollm2_t5():
    out = os.path.join(TOK, "smollm2-t5")
    shutil.rmtree(out, ignore_errors=True)
    tok = AutoTokenizer.from_pretrained(os.path.join(TOK, "families", "digits"))
    tok.save_pretrained(out)
    # save_pretrained records where it was loaded from; nothing else differs between runs
    cfg_path = os.path.join(out, "tokenizer_config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    for k in ("is_local", "local_files_only"):
        cfg.pop(k, None)
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    assert sorted(os.listdir(out)) == ["chat_template.jinja", "tokenizer.json",
                                       "tokenizer_config.json"], os.listdir(out)
    assert "chat_template" not in cfg
    ids = AutoTokenizer.from_pretrained(out).apply_chat_template(
        [{"role": "user", "content": SMOLLM2_PROMPT}], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    with open(os.path.join(HERE, "..", "generate", "test_generate_cli_smollm2.jsonl"),
              encoding="utf-8") as f:
        golden = json.loads(f.readline())
    assert golden["prompt"] == SMOLLM2_PROMPT and golden["ids"] == list(ids)


def none_as(v):
    return -1 if v is None else v


def main():
    write_smollm2_t5()
    with open(os.path.join(HERE, "golden_special_tokens.jsonl"), "w", encoding="utf-8") as f:
        for d in DIRS:
            t = AutoTokenizer.from_pretrained(real_tokenizers.tokenizer_dir(d))
            rec = {"dir": d, "bos_id": none_as(t.bos_token_id), "eos_id": none_as(t.eos_token_id),
                   "pad_id": none_as(t.pad_token_id),
                   "hi_ids": t("hi", add_special_tokens=True)["input_ids"]}
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
