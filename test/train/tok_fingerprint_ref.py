#!/usr/bin/env python3
"""The tokenizer fingerprint computed from doc/formats.md's definition alone, as a
reference for ftmpi's (src/io/tok_fingerprint.c). usage: tok_fingerprint_ref.py FILE..."""
import json
import sys


def b(s):
    e = s.encode("utf-8")
    return str(len(e)).encode() + b":" + e


def canon(v):
    if v is None:
        return b"null"
    if v is True or v is False:
        return b"true" if v else b"false"
    if isinstance(v, int):
        return str(v).encode()
    if isinstance(v, float):
        return ("%.17g" % v).encode()
    if isinstance(v, str):
        return b(v)
    if isinstance(v, list):
        return b"[" + b",".join(canon(x) for x in v) + b"]"
    items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-8"))
    return b"{" + b",".join(b(k) + b"=" + canon(x) for k, x in items) + b"}"


def fingerprint(path):
    t = json.load(open(path, encoding="utf-8"))
    out = [b"ftmpi tokenizer fingerprint 1\n"]
    vocab = sorted(t["model"]["vocab"].items(), key=lambda kv: (kv[1], kv[0].encode("utf-8")))
    out += [b"V %d " % i + b(s) + b"\n" for s, i in vocab]
    for m in t["model"].get("merges") or []:
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        out.append(b"M " + b(left) + b" " + b(right) + b"\n")
    added = sorted(t.get("added_tokens") or [], key=lambda a: (a["id"], a["content"].encode()))
    out += [b"A %d %d " % (a["id"], 1 if a.get("special") is True else 0) + b(a["content"]) + b"\n"
            for a in added]
    out.append(b"N " + canon(t.get("normalizer")) + b"\nP " + canon(t.get("pre_tokenizer")) + b"\n")
    h = 0xcbf29ce484222325
    for byte in b"".join(out):
        h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h


for p in sys.argv[1:]:
    print(fingerprint(p))
