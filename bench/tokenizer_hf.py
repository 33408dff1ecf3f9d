#!/usr/bin/env python3
"""Tokenizer benchmark helper (see bench/tokenizer.sh).

    tokenizer_hf.py gen OUT.jsonl SIZE_MB          write a {"text": ...} corpus (seeded)
    tokenizer_hf.py hf TOKENIZER.json IN.jsonl     HF tokenizers encode_batch timing

The corpus reuses the string generator of test/tokenizer/gen_golden.py (mixed scripts, digits,
whitespace runs, punctuation, contractions, special-token look-alikes), joined into
paragraph-sized documents of 0.5-4 KB. The "hf" mode prints one JSON line:
{"tokens": N, "seconds": S, "bytes": B, "threads": T}; the thread count is whatever rayon
uses (set RAYON_NUM_THREADS to pin it).
"""
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "tokenizer"))


def gen(out_path, size_mb):
    import gen_golden  # the corpus generator of the golden tests

    rng = random.Random(7)
    target = int(size_mb * 1024 * 1024)
    written = 0
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        while written < target:
            doc_len = rng.randint(512, 4096)
            parts = []
            n = 0
            while n < doc_len:
                s = gen_golden.random_text(rng)
                parts.append(s)
                n += len(s.encode("utf-8")) + 1
            text = rng.choice([" ", "\n", "\n\n"]).join(parts)
            line = json.dumps({"text": text}, ensure_ascii=False) + "\n"
            out.write(line)
            written += len(line.encode("utf-8"))
    print(f"{out_path}: {written / 1e6:.1f} MB", file=sys.stderr)


def hf(tokenizer_path, in_path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_path)
    with open(in_path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    t0 = time.perf_counter()
    encs = tok.encode_batch(texts, add_special_tokens=False)
    secs = time.perf_counter() - t0
    tokens = sum(len(e.ids) for e in encs)
    threads = os.environ.get("RAYON_NUM_THREADS", str(os.cpu_count()))
    print(json.dumps({"tokens": tokens, "seconds": secs, "bytes": n_bytes, "threads": int(threads)}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "gen":
        gen(sys.argv[2], float(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "hf":
        hf(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
