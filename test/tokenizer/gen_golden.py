#!/usr/bin/env python3
"""Generate the golden files that test_tokenizer_golden compares ftmpi's tokenizer against.

Reference: Hugging Face `tokenizers` (pip install tokenizers; generated with 0.23.3).
Deterministic: fixed seed, no dependence on the environment. Run from anywhere:

    python3 test/tokenizer/gen_golden.py            # writes test/tokenizer/golden*.jsonl

golden.jsonl, one JSON object per random string; "tokenizer" below is one of
l3 (llama3), l31 (llama3.1), l2 (llama2):
    "text"          the string
    "<tok>"         HF encode(text, add_special_tokens=False).ids     (special text matched)
    "<tok>n"        same with encode_special_tokens=True (special text is plain text)
    "<tok>d"        HF decode("<tok>", skip_special_tokens=False)
    "<tok>s"        HF decode("<tok>", skip_special_tokens=True)
To keep the file small a key is left out when its value equals a fallback:
    <tok>n -> <tok>;  <tok>d -> text;  <tok>s -> <tok>d;  any l31 key -> the l3 key.

golden_decode.jsonl: random id sequences (byte tokens, specials, partial UTF-8 ...):
    {"tok": "l2", "ids": [...], "d": decode(skip_special=False), "s": decode(skip_special=True)}

synthetic_bytelevel.json, synthetic_sentencepiece.json: tiny tokenizers exercising what the
Llama files do not (added tokens with lstrip / rstrip / single_word / normalized, non-special
added tokens, unk fusing), and golden_synthetic.jsonl with HF's answers for them:
    {"tok": "synthetic_bytelevel.json", "text": ..., "ids": [...], "idsn": [...] (plain),
     "d": decode(ids, skip_special=False), "s": decode(ids, skip_special=True)}
"""
import json
import os
import random
import sys

from tokenizers import Tokenizer

import real_tokenizers  # the real tokenizers' tokenizer.json is committed as .xz

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZERS = [("l3", "llama3"), ("l31", "llama3.1"), ("l2", "llama2")]
N_STRINGS = 10000
N_DECODE = 400  # per tokenizer
SEED = 20240611

LATIN = ["the", "quick", "brown", "fox", "Hello", "world", "HTTP", "tokenizer", "a", "I",
         "iPhone", "camelCase", "snake_case", "foo", "Bar", "BAZ", "x", "lorem", "ipsum",
         "dolor", "sit", "amet", "is", "don", "won", "Z", "zz", "ab", "The", "OK"]
ACCENTED = ["naïve", "café", "résumé", "Ångström", "façade", "über", "Straße", "niño",
            "jalapeño", "coöperate", "Dvořák", "Łódź", "ſ", "ǅ", "ﬁ", "É", "e\u0301",
            "a\u0308\u0301", "İstanbul", "ǆungla"]
CJK = ["日本語", "中文", "汉字", "東京", "こんにちは", "カタカナ", "한국어", "안녕하세요",
       "你好世界", "漢", "ｱｲｳ", "ＡＢＣ", "１２３", "〇", "語"]
CYRILLIC = ["привет", "мир", "Москва", "ЁЖИК", "съешь", "ещё", "Україна", "ґ", "Ў"]
ARABIC = ["مرحبا", "العالم", "السلام", "عليكم", "שלום", "עולם", "٣٤٥", "۱۲۳", "ـ", "ﷺ"]
OTHER_SCRIPTS = ["नमस्ते", "हिन्दी", "ελληνικά", "Ωμέγα", "ไทย", "ქართული", "Հայերեն",
                 "தமிழ்", "বাংলা", "አማርኛ", "ᚠᚢᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "Ⅻ", "½", "²³", "①②"]
EMOJI = ["🦙", "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇺🇸", "❤️", "✨", "🏳️‍🌈", "🤖", "©", "™",
         "☃", "🀄", "🎉🎉", "1️⃣", "👩🏻‍💻"]
PUNCT = [".", ",", "!", "?", "...", "…", "—", "–", "-", "--", "(", ")", "[", "]", "{", "}",
         "\"", "'", "`", "``", "''", "«", "»", "“", "”", "‘", "’", ";", ":", "/", "\\", "|",
         "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "<<", ">>", "~", "_", "!!",
         "?!", "::", "->", "=>", "</", "/>", "<!--", "-->", "#!", "&&", "||", "¿", "¡", "·"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M",
                "'LL", "'D", "'ſ", "’s", "’ll", "n't", "N'T", "'", "''s", "'x", "'dd"]
SPECIAL_LIKE = ["<|eot_id|>", "<|eot_id", "eot_id|>", "<|eot_id |>", "<s>", "</s>", "<unk>",
                "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eom_id|>", "<|python_tag|>",
                "<|reserved_special_token_3|>", "<|reserved_special_token_250|>",
                "<|finetune_right_pad_id|>", "<<s>>", "<s", "s>", "<|", "|>", "<|<|eot_id|>|>",
                "<|begin_of_text|><|begin_of_text|>", "<S>", "< s>"]
WHITESPACE = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n",
              "\r\n", "\r", "\r\r\n", " \n", "\n ", " \t ", "\t\n", "\u00a0", "\u3000",
              "\u2003", "\u0085", "\u2028", "\u000b", "\u000c", " \u00a0 ", "\n\t  "]
ODD = ["\u200b", "\u200d", "\ufeff", "\u00ad", "\u0000", "\u0001", "\u001f", "\u007f",
       "\ufffd", "\U0001F3FB", "\u0301", "\u0308", "\u034f", "\ue000", "\U0010fffd", "\u2060",
       "\u180e", "\u0600", "\u061c", "\U000e0041"]


def digits(rng):
    n = rng.choice([1, 1, 2, 3, 3, 4, 5, 6, 7, 10, 16])
    s = "".join(rng.choice("0123456789") for _ in range(n))
    r = rng.random()
    if r < 0.1:
        s = s[:len(s) // 2] + "." + s[len(s) // 2:]
    elif r < 0.15:
        s = s + "," + "".join(rng.choice("0123456789") for _ in range(3))
    elif r < 0.2:
        s = "".join(chr(0x0660 + int(c)) for c in s)  # Arabic-Indic digits: \p{N}
    return s


def random_char(rng):
    """A random code point from a few ranges (no surrogates); mostly assigned ones."""
    lo, hi = rng.choice([(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x52f), (0x590, 0x6ff),
                         (0x900, 0x97f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3),
                         (0x2000, 0x2bff), (0x1f300, 0x1f64f), (0xff00, 0xffef)])
    return chr(rng.randint(lo, hi))


POOLS = [(LATIN, 30), (ACCENTED, 6), (CJK, 6), (CYRILLIC, 5), (ARABIC, 5), (OTHER_SCRIPTS, 4),
         (EMOJI, 6), (PUNCT, 14), (CONTRACTIONS, 6), (SPECIAL_LIKE, 5), (ODD, 2)]


def fragment(rng):
    r = rng.random()
    if r < 0.08:
        return digits(rng)
    if r < 0.12:
        return "".join(random_char(rng) for _ in range(rng.randint(1, 4)))
    if r < 0.14:
        w = rng.choice(LATIN)
        return w.upper() if rng.random() < 0.5 else w.capitalize()
    pools, weights = zip(*POOLS)
    return rng.choice(rng.choices(pools, weights)[0])


def separator(rng):
    r = rng.random()
    if r < 0.55:
        return " "
    if r < 0.75:
        return ""
    return rng.choice(WHITESPACE)


def random_text(rng):
    r = rng.random()
    if r < 0.01:
        n = rng.randint(0, 1)  # empty or one fragment
    elif r < 0.015:
        n = rng.randint(60, 200)  # long inputs: BPE on long words, Llama 2 whole-text BPE
    else:
        n = rng.randint(1, 10)
    parts = []
    for i in range(n):
        if i or rng.random() < 0.2:
            parts.append(separator(rng))
        parts.append(fragment(rng))
    if rng.random() < 0.1:
        parts.append(rng.choice(WHITESPACE))
    s = "".join(parts)
    if rng.random() < 0.01:  # a long word without spaces
        s += "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(50, 200)))
    return s


def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def added(id_, content, special, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def synthetic_tokenizers():
    """Two small tokenizer.json documents (ids of added tokens follow HF's numbering)."""
    llama3 = json.load(open(real_tokenizers.tokenizer_json("llama3"), encoding="utf-8"))
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    vocab.update({"ab": 256, "Ġa": 257, "Ġab": 258})
    bytelevel = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(259, "<L>", True, lstrip=True), added(260, "<R>", True, rstrip=True),
                         added(261, "word", False, single_word=True),
                         added(262, "<N>", False, normalized=True)],
        "normalizer": None, "pre_tokenizer": llama3["pre_tokenizer"], "post_processor": None,
        "decoder": llama3["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [["a", "b"], ["Ġ", "a"], ["Ġa", "b"]]}}
    llama2 = json.load(open(real_tokenizers.tokenizer_json("llama2"), encoding="utf-8"))
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
    vocab.update({"▁": 259, "a": 260, "b": 261, "▁a": 262, "ab": 263, "▁ab": 264, "[": 265,
                  "]": 266, "N": 267})
    # no byte fallback for "é"... except that it is on; "x" and "y" go to a fused <unk>
    sentencepiece = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>", True), added(1, "<s>", True), added(2, "</s>", True),
                         added(268, "[N]", False, normalized=True),
                         added(269, "<L>", True, lstrip=True)],
        "normalizer": llama2["normalizer"], "pre_tokenizer": None,
        "post_processor": llama2["post_processor"], "decoder": llama2["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": False,
                  "vocab": vocab, "merges": ["▁ a", "a b", "▁a b"]}}
    return {"synthetic_bytelevel.json": bytelevel, "synthetic_sentencepiece.json": sentencepiece}


SYNTHETIC_TEXTS = ["x <L> y", "x  <L>y", "x<R>  y", "x <R>\n\ny", "word words aword word_ word.",
                   "a<N>b ab", "  <L><R>  ", "<L>", "ab ab  ab", "wordword word", "", " ",
                   "xy ab", "ab xyx", "x [N] ab", "[N]", "ab<L>ab", "ab <L> ab", "é ab",
                   "<s>ab</s> <unk>", "a\u3000b\u0085<L>", "<N><N>word<N>"]


def encode(tok, text, plain):
    tok.encode_special_tokens = plain
    return tok.encode(text, add_special_tokens=False).ids


def main():
    rng = random.Random(SEED)
    toks = {k: Tokenizer.from_file(real_tokenizers.tokenizer_json(d)) for k, d in TOKENIZERS}

    out_path = os.path.join(HERE, "golden.jsonl")
    with open(out_path, "w", encoding="utf-8", newline="\n") as out:
        for _ in range(N_STRINGS):
            text = random_text(rng)
            rec = {"text": text}
            full = {}
            for key, _ in TOKENIZERS:
                tok = toks[key]
                ids = encode(tok, text, False)
                full[key] = ids
                full[key + "n"] = encode(tok, text, True)
                full[key + "d"] = tok.decode(ids, skip_special_tokens=False)
                full[key + "s"] = tok.decode(ids, skip_special_tokens=True)
            for key, _ in TOKENIZERS:
                fallback = {key: None, key + "n": full[key], key + "d": text,
                            key + "s": full[key + "d"]}
                for k, fb in fallback.items():
                    v = full[k]
                    if key == "l31" and v == full["l3" + k[3:]]:
                        continue
                    if key != "l31" and fb is not None and v == fb:
                        continue
                    rec[k] = v
            out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")

    dec_path = os.path.join(HERE, "golden_decode.jsonl")
    with open(dec_path, "w", encoding="utf-8", newline="\n") as out:
        for key, _ in TOKENIZERS:
            tok = toks[key]
            vocab = tok.get_vocab_size(with_added_tokens=True)
            specials = [i for i in range(vocab) if tok.id_to_token(i) and
                        tok.id_to_token(i).startswith("<") and tok.id_to_token(i).endswith(">")
                        and (i >= 128000 or i < 3)]
            for _ in range(N_DECODE):
                ids = []
                for _ in range(rng.randint(0, 12)):
                    r = rng.random()
                    if r < 0.25:
                        ids.append(rng.choice(specials))
                    elif r < 0.55 and key == "l2":
                        ids.append(3 + rng.choice([rng.randint(0, 255), rng.randint(0x80, 0xff),
                                                   0xe6, 0x97, 0xa5, 0xf0, 0x9f, 0x20, 0x0a]))
                    elif r < 0.55:
                        ids.append(rng.randint(0, 255) if rng.random() < 0.5 else
                                   rng.choice([11410, 99, 247, 9906, 220, 256, 198, 27, 91]))
                    else:
                        ids.append(rng.randint(0, 31999 if key == "l2" else 127999))
                rec = {"tok": key, "ids": ids, "d": tok.decode(ids, skip_special_tokens=False),
                       "s": tok.decode(ids, skip_special_tokens=True)}
                out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")

    syn_path = os.path.join(HERE, "golden_synthetic.jsonl")
    with open(syn_path, "w", encoding="utf-8", newline="\n") as out:
        for name, doc in synthetic_tokenizers().items():
            path = os.path.join(HERE, name)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
                f.write("\n")
            tok = Tokenizer.from_file(path)
            for text in SYNTHETIC_TEXTS:
                ids = encode(tok, text, False)
                rec = {"tok": name, "text": text, "ids": ids, "idsn": encode(tok, text, True),
                       "d": tok.decode(ids, skip_special_tokens=False),
                       "s": tok.decode(ids, skip_special_tokens=True)}
                out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")

    for p in (out_path, dec_path, syn_path):
        print(f"{p}: {os.path.getsize(p)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
