#!/usr/bin/env python3
"""Golden files for ftmpi-prep's ChatML templates (chatml, qwen2-chat, qwen2.5-chat) and
Mistral v0.3's (mistral-chat, golden_chat_mistral.jsonl, on the tiny Mistral-pipeline
tokenizer test/data/tokenizers/families/mistral/: <s>, per user turn [INST] " " [system
"\n\n" before the last user content] content [/INST], per assistant turn " " strip(content)
</s> as targets).

Writes test/prep/golden_chat_{chatml,qwen2,qwen2.5}.jsonl: the expected {"ids","mask"} of
each record of chat_sample.jsonl, encoded with the tiny Qwen2-pipeline tokenizer
test/data/tokenizers/families/qwen2/tokenizer.json. Same scheme as gen_golden.py (written from
doc/prep.md, independently of the C code): pieces encoded separately with special-token
parsing off; per message <|im_start|> role "\\n" content <|im_end|> "\\n", the assistant
content and its <|im_end|> are targets; no BOS; qwen2/qwen2.5 put their default system turn
first when the record has no system message.

Cross-check: each record whose contents hold no "<" and do not start with whitespace (where
piecewise and joint encoding can legitimately differ) is also rendered by transformers'
apply_chat_template with the real chat_template (test/data/chat_templates/*.jinja) and
tokenized in one go; the ids must be equal.

smollm2-chat (golden_chat_smollm2.jsonl) is the same ChatML scheme with SmolLM2-Instruct's default
system turn, on the tiny tokenizer with SmolLM2's pipeline (test/data/tokenizers/families/digits/),
cross-checked against test/data/chat_templates/smollm2.jinja; it also writes ftmpi-generate's
SmolLM2 prompt goldens (test/generate/test_generate_cli_smollm2.jsonl).

Usage: python3 test/prep/gen_golden_chatml.py   (needs pip tokenizers, transformers, jinja2)
"""
import json
import os

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from gen_golden import HERE, Pieces, chat_records, encode_pieces, write_jsonl

TOKJSON = os.path.join(HERE, "..", "data", "tokenizers", "families", "qwen2", "tokenizer.json")
TPLDIR = os.path.join(HERE, "..", "data", "chat_templates")
DEFAULT_SYSTEM = {
    "chatml": None,
    "qwen2": "You are a helpful assistant.",
    "qwen2.5": "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
}


def render_chatml(rec, tok, default_system):
    start, end = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")
    msgs = rec["messages"]
    if default_system is not None and msgs[0]["role"] != "system":
        msgs = [{"role": "system", "content": default_system}] + msgs
    p = Pieces()
    for m in msgs:
        asst = m["role"] == "assistant"
        p.special(start, False)
        p.text(m["role"] + "\n", False)
        p.text(m["content"], asst)
        p.special(end, asst)
        p.text("\n", False)
    return p


MISTRAL_JSON = os.path.join(HERE, "..", "data", "tokenizers", "families", "mistral",
                            "tokenizer.json")


def render_mistral(rec, tok):
    msgs = rec["messages"]
    sys_ = None
    if msgs[0]["role"] == "system":
        sys_, msgs = msgs[0]["content"], msgs[1:]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    p = Pieces()
    p.special(tok.token_to_id("<s>"), False)
    for i, m in enumerate(msgs):
        if m["role"] == "user":
            p.special(tok.token_to_id("[INST]"), False)
            p.text(" " + (sys_ + "\n\n" if sys_ is not None and i == last_user else "")
                   + m["content"], False)
            p.special(tok.token_to_id("[/INST]"), False)
        else:
            p.text(" " + m["content"].strip(), True)
            p.special(tok.token_to_id("</s>"), True)
    return p


def mistral():
    tok = Tokenizer.from_file(MISTRAL_JSON)
    tok.encode_special_tokens = True
    tpl = open(os.path.join(TPLDIR, "mistral-v0.3.jinja"), encoding="utf-8").read()
    hf = PreTrainedTokenizerFast(tokenizer_file=MISTRAL_JSON, chat_template=tpl,
                                 bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    out, checked = [], 0
    for rec in chat_records():
        ids, mask = encode_pieces(tok, render_mistral(rec, tok))
        out.append({"ids": ids, "mask": mask})
        if all("<" not in m["content"] and "[" not in m["content"] for m in rec["messages"]):
            joint = hf.apply_chat_template(rec["messages"], tokenize=True,
                                           add_generation_prompt=False, return_dict=False)
            assert list(joint) == ids, "mistral: %r\n%r\n%r" % (rec, list(joint), ids)
            checked += 1
    write_jsonl(os.path.join(HERE, "golden_chat_mistral.jsonl"), out)
    print("mistral: %d chat examples (%d checked against apply_chat_template)" % (len(out), checked))


DIGITS_JSON = os.path.join(HERE, "..", "data", "tokenizers", "families", "digits",
                           "tokenizer.json")
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def smollm2():
    """smollm2-chat: ChatML with SmolLM2-Instruct's default system turn, on the tiny tokenizer
    with SmolLM2's pipeline (Digits + ByteLevel). Also the generation prompts of
    ftmpi-generate's test (test/generate/test_generate_cli_smollm2.jsonl)."""
    tok = Tokenizer.from_file(DIGITS_JSON)
    tok.encode_special_tokens = True
    tpl = open(os.path.join(TPLDIR, "smollm2.jinja"), encoding="utf-8").read()
    hf = PreTrainedTokenizerFast(tokenizer_file=DIGITS_JSON, chat_template=tpl)
    out, checked = [], 0
    for rec in chat_records():
        ids, mask = encode_pieces(tok, render_chatml(rec, tok, SMOLLM2_SYSTEM))
        out.append({"ids": ids, "mask": mask})
        if all("<" not in m["content"] and m["content"][:1] == m["content"][:1].strip()
               for m in rec["messages"]):
            joint = hf.apply_chat_template(rec["messages"], tokenize=True,
                                           add_generation_prompt=False, return_dict=False)
            assert list(joint) == ids, "smollm2: %r\n%r\n%r" % (rec, list(joint), ids)
            checked += 1
    write_jsonl(os.path.join(HERE, "golden_chat_smollm2.jsonl"), out)
    print("smollm2: %d chat examples (%d checked against apply_chat_template)" % (len(out), checked))
    rows = []
    for system, prompt in [(None, "Hello, naïve 12 世界 x1y22"), ("Be brief.", "What is 2+2?")]:
        msgs = ([{"role": "system", "content": system}] if system else []) + \
               [{"role": "user", "content": prompt}]
        ids = hf.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True,
                                     return_dict=False)
        rows.append({"system": system, "prompt": prompt, "ids": list(ids)})
    write_jsonl(os.path.join(HERE, "..", "generate", "test_generate_cli_smollm2.jsonl"), rows)


def main():
    tok = Tokenizer.from_file(TOKJSON)
    tok.encode_special_tokens = True  # dataset text is plain text
    recs = chat_records()
    for name, sysmsg in DEFAULT_SYSTEM.items():
        out, checked = [], 0
        if True:
            tpl = open(os.path.join(TPLDIR, name + ".jinja"), encoding="utf-8").read()
            hf = PreTrainedTokenizerFast(tokenizer_file=TOKJSON, chat_template=tpl)
        for rec in recs:
            ids, mask = encode_pieces(tok, render_chatml(rec, tok, sysmsg))
            out.append({"ids": ids, "mask": mask})
            plain = all("<" not in m["content"] and m["content"][:1] == m["content"][:1].strip()
                        for m in rec["messages"])
            if hf is not None and plain:
                joint = hf.apply_chat_template(rec["messages"], tokenize=True,
                                               add_generation_prompt=False, return_dict=False)
                assert list(joint) == ids, "%s: %r\n%r\n%r" % (name, rec, list(joint), ids)
                checked += 1
        write_jsonl(os.path.join(HERE, "golden_chat_%s.jsonl" % name), out)
        print("%s: %d chat examples (%d checked against apply_chat_template)"
              % (name, len(out), checked))
    mistral()
    smollm2()


if __name__ == "__main__":
    main()
