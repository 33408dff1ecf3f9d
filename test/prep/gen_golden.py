#!/usr/bin/env python3
"""Golden files for ftmpi-prep, from the Hugging Face `tokenizers` library.

Writes (in this directory):
  alpaca_sample.jsonl, chat_sample.jsonl          the inputs (fixed; regenerated identically)
  golden_{alpaca,chat}_{llama3,llama2}.jsonl      expected {"ids":[...],"mask":[...]} per example

The rendering below is written from the spec in doc/prep.md, independently of the C code:
prompt pieces and response pieces are encoded separately with special-token parsing OFF
(tokenizer.encode_special_tokens = True), the template's own special tokens are ids, BOS first
(mask 0), the response and EOS are targets (mask 1), the first token of an example has mask 0.

As a cross-check of the piecewise scheme, each chat example whose text holds no special-token
text is also rendered with the model's own Jinja chat template (tokenizer_config.json) and
encoded in one go; the ids must be the same.

Usage: python3 test/prep/gen_golden.py   (needs: pip tokenizers, jinja2)
"""
import json
import os
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
# appended, not prepended: test/tokenizer has a gen_golden.py of its own
sys.path.append(os.path.join(HERE, "..", "tokenizer"))
import real_tokenizers  # noqa: E402  (the real tokenizers' tokenizer.json is committed as .xz)

ALPACA_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
ALPACA_NO_INPUT = (
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")


def alpaca_records():
    long_text = " ".join("word%d, and then some more text;" % i for i in range(300))
    recs = [
        ("Give three tips for staying healthy.", "",
         "1. Eat a balanced diet.\n2. Exercise regularly.\n3. Sleep well."),
        ("What is the capital of France?", "", "Paris."),
        ("Translate to German.", "Good morning!", "Guten Morgen!"),
        ("Classify the sentiment.", "I love this movie", "Positive"),
        ("Summarize the text.", long_text, "It is a long list of words."),
        ("Write a long story.", "", long_text),
        ("Répondez en français : où est la gare ?", "", "La gare est à droite. Ça va ?"),
        ("日本語に翻訳してください。", "Hello, world.", "こんにちは、世界。"),
        ("Add an emoji.", "llama", "llama 🦙🦙 — done"),
        ("Explain the token <|eot_id|> literally.", "<|begin_of_text|>",
         "The text <|eot_id|> and </s> and <s> are plain text here."),
        ("Whitespace   inside\tand\ttabs.", "  leading and trailing  ", "  padded answer  "),
        ("Multiple\n\nparagraphs\n\n\n", "line1\r\nline2", "a\n\nb\n"),
        ("Numbers", "12345 678 9", "3.14159 and 2,718,281"),
        ("Empty output allowed?", "", ""),
        ("", "empty instruction", "still fine"),
        ("Quote \"this\" and 'that'.", "", "\"Quoted\" 'text'."),
        ("Code:", "def f(x):\n    return x * 2\n", "```python\nprint(f(3))\n```"),
        ("Backslashes \\ and slashes /", "C:\\path\\file", "\\n is not a newline"),
        ("Accents: naïve café", "", "Señor Müller’s façade"),
        ("Greek and Cyrillic", "αβγ δεζ", "Привет мир"),
        ("Arabic", "مرحبا بالعالم", "أهلا"),
        ("Korean", "", "안녕하세요"),
        ("Mixed scripts 混合 text", "abc漢字def", "ok"),
        ("Control-ish chars", "bell\u0007 and nul-free", "fine\u000b"),
        ("Zero width", "a\u200bb", "c\u200dd"),
        ("Long number", "", "1234567890123456789012345678901234567890"),
        ("Repeated", "", "ha" * 200),
        ("Punctuation!!!", "???", "...!!!,,,"),
        ("Trailing space ", "", "answer "),
        ("Newline answer", "", "\n"),
        ("Spaces answer", "", "   "),
    ]
    return [{"instruction": i, "input": x, "output": o} for i, x, o in recs]


def chat_records():
    return [
        {"messages": [{"role": "user", "content": "Hello"},
                      {"role": "assistant", "content": "Hi!"}]},
        {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                      {"role": "user", "content": "What is 2+2?"},
                      {"role": "assistant", "content": "4"}]},
        {"messages": [{"role": "user", "content": "  padded question \n"},
                      {"role": "assistant", "content": "\n  padded answer  "},
                      {"role": "user", "content": "Second turn?"},
                      {"role": "assistant", "content": "Second answer."}]},
        {"messages": [{"role": "system", "content": " Be brief. "},
                      {"role": "user", "content": "Summarize: the cat sat on the mat."},
                      {"role": "assistant", "content": "A cat sat."},
                      {"role": "user", "content": "Shorter?"},
                      {"role": "assistant", "content": "Cat sat."}]},
        {"messages": [{"role": "user", "content": "Unicode: 日本語 🦙 naïve"},
                      {"role": "assistant", "content": "Répondu — ça marche ✓"}]},
        {"messages": [{"role": "user", "content": "\u3000ideographic space\u3000"},
                      {"role": "assistant", "content": "\u00a0nbsp\u00a0"}]},
        {"messages": [{"role": "user", "content": "Say <|eot_id|> and </s>"},
                      {"role": "assistant", "content": "<|eot_id|> </s> <s> [INST]"}]},
        {"messages": [{"role": "user", "content": "Code please"},
                      {"role": "assistant", "content": "```c\nint main(void) { return 0; }\n```"}]},
        {"messages": [{"role": "user", "content": "Empty answer?"},
                      {"role": "assistant", "content": ""}]},
        {"messages": [{"role": "user", "content": "Lists:\n- a\n- b"},
                      {"role": "assistant", "content": "1. one\n2. two\n\nDone."}]},
    ]


def py_strip(s):
    return s.strip()  # Jinja `trim` is Python str.strip()


class Pieces:
    """(text or special id, target) pieces; consecutive text pieces with the same target merge."""

    def __init__(self):
        self.p = []

    def text(self, s, target):
        if not s:
            return
        if self.p and isinstance(self.p[-1][0], str) and self.p[-1][1] == target:
            self.p[-1] = (self.p[-1][0] + s, target)
        else:
            self.p.append((s, target))

    def special(self, i, target):
        self.p.append((i, target))


def encode_pieces(tok, pieces):
    ids, mask = [], []
    for v, target in pieces.p:
        if isinstance(v, int):
            got = [v]
        else:
            got = tok.encode(v, add_special_tokens=False).ids
        ids += got
        mask += [1 if target else 0] * len(got)
    if mask:
        mask[0] = 0
    return ids, mask


def render_alpaca(rec, bos, eos):
    p = Pieces()
    p.special(bos, False)
    tpl = ALPACA_INPUT if rec["input"] else ALPACA_NO_INPUT
    p.text(tpl.replace("{instruction}", rec["instruction"]).replace("{input}", rec["input"]), False)
    p.text(rec["output"], True)
    p.special(eos, True)
    return p


def render_llama3(rec, tok, eos):
    sp = tok.token_to_id
    p = Pieces()
    p.special(sp("<|begin_of_text|>"), False)
    for m in rec["messages"]:
        asst = m["role"] == "assistant"
        p.special(sp("<|start_header_id|>"), False)
        p.text(m["role"], False)
        p.special(sp("<|end_header_id|>"), False)
        p.text("\n\n", False)
        p.text(py_strip(m["content"]), asst)
        p.special(eos if asst else sp("<|eot_id|>"), asst)
    return p


def render_llama2(rec, bos, eos):
    msgs = rec["messages"]
    sys = None
    if msgs[0]["role"] == "system":
        sys, msgs = msgs[0]["content"], msgs[1:]
    p = Pieces()
    for i, m in enumerate(msgs):
        c = m["content"]
        if i == 0 and sys is not None:
            c = "<<SYS>>\n" + sys + "\n<</SYS>>\n\n" + c
        c = py_strip(c)
        if m["role"] == "user":
            p.special(bos, False)
            p.text("[INST] " + c + " [/INST]", False)
        else:
            # SentencePiece prepends "▁" to each separately encoded text = the leading " ".
            p.text(c + " ", True)
            p.special(eos, True)
    return p


def joint_chat_ids(tokdir, tok, rec):
    """The model's own chat template, rendered and encoded in one go (specials parsed)."""
    import jinja2
    cfg = json.load(open(os.path.join(tokdir, "tokenizer_config.json")))
    def tokstr(v):
        return v["content"] if isinstance(v, dict) else v
    env = jinja2.Environment()
    env.globals["raise_exception"] = lambda msg: (_ for _ in ()).throw(ValueError(msg))
    text = env.from_string(cfg["chat_template"]).render(
        messages=rec["messages"], bos_token=tokstr(cfg["bos_token"]),
        eos_token=tokstr(cfg["eos_token"]), add_generation_prompt=False)
    tok.encode_special_tokens = False
    ids = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = True
    return ids


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")


def main():
    alpaca, chat = alpaca_records(), chat_records()
    write_jsonl(os.path.join(HERE, "alpaca_sample.jsonl"), alpaca)
    write_jsonl(os.path.join(HERE, "chat_sample.jsonl"), chat)
    for name in ("llama3", "llama2"):
        tokdir = real_tokenizers.tokenizer_dir(name)
        tok = Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
        tok.encode_special_tokens = True  # dataset text is plain text
        if name == "llama3":
            bos, eos_text, eos_chat = 128000, tok.token_to_id("<|end_of_text|>"), tok.token_to_id("<|eot_id|>")
        else:
            bos, eos_text, eos_chat = tok.token_to_id("<s>"), tok.token_to_id("</s>"), tok.token_to_id("</s>")
        out = []
        for rec in alpaca:
            ids, mask = encode_pieces(tok, render_alpaca(rec, bos, eos_text))
            out.append({"ids": ids, "mask": mask})
        write_jsonl(os.path.join(HERE, "golden_alpaca_%s.jsonl" % name), out)
        out, checked = [], 0
        for rec in chat:
            pieces = render_llama3(rec, tok, eos_chat) if name == "llama3" else render_llama2(rec, bos, eos_chat)
            ids, mask = encode_pieces(tok, pieces)
            out.append({"ids": ids, "mask": mask})
            plain = all("<" not in m["content"] for m in rec["messages"])
            if plain:
                joint = joint_chat_ids(tokdir, tok, rec)
                assert joint == ids, "%s: piecewise != chat template for %r\n%r\n%r" % (name, rec, joint, ids)
                checked += 1
        write_jsonl(os.path.join(HERE, "golden_chat_%s.jsonl" % name), out)
        print("%s: %d alpaca, %d chat examples (%d checked against the Jinja chat template)"
              % (name, len(alpaca), len(chat), checked))


if __name__ == "__main__":
    main()
