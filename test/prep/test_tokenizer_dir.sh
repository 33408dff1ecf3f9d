#!/bin/sh
# A tokenizer directory as transformers writes and reads it, in ftmpi-prep and
# ftmpi-generate alike:
# - the chat template comes from chat_template.jinja (transformers 5's layout,
#   test/data/tokenizers/smollm2-t5/), then chat_template.json, then tokenizer_config.json's
#   chat_template, the first that has one; the named-template list form uses "default";
# - the ids equal transformers' apply_chat_template (golden_chat_smollm2.jsonl and
#   test_generate_cli_smollm2.jsonl were cross-checked against it on the same tokenizer;
#   test/tokenizer/gen_special_tokens.py asserts the directory gives the same ids);
# - a malformed tokenizer_config.json (invalid JSON, not an object, chat_template an
#   integer, a symlink to /dev/zero, a FIFO, 300 MB) or an unknown template: one line naming
#   the file, exit 2, in both tools; a chat model without any template: a one-line note;
# - ftmpi-convert export --tokenizer copies chat_template.jinja and the other files.
. "$(dirname "$0")/lib.sh"
GEN="$B/ftmpi-generate"
T5="$TOK/smollm2-t5"
SMG="$S/test/generate/test_generate_cli_smollm2.jsonl"
PROMPT="Hello, naïve 12 世界 x1y22"
sm_ids() { sed -n "1s/.*\"ids\":\[\([0-9,]*\)\].*/\1/p" "$SMG"; }
QWEN25_CFG="$TOK/families/qwen2/tokenizer_config.json"

# prep_is_smollm2 DIR WHAT / gen_is_smollm2 DIR WHAT: the template recognised is SmolLM2's
prep_is_smollm2() {
    "$PREP" -q -t "$1/tokenizer.json" --seq-len 4096 -o out.h5 --dump-examples got.jsonl \
        "$D/chat_sample.jsonl" || fail "$2: ftmpi-prep failed"
    cmp -s got.jsonl "$D/golden_chat_smollm2.jsonl" || fail "$2: prep's ids are not SmolLM2's template's"
}
gen_is_smollm2() {
    got=$("$GEN" --tokenizer "$1/tokenizer.json" --prompt-ids "$PROMPT") || fail "$2: ftmpi-generate failed"
    [ "$got" = "$(sm_ids)" ] || fail "$2: generate's ids are not apply_chat_template's: $got"
}
prep_is_smollm2 "$T5" "chat_template.jinja"
gen_is_smollm2 "$T5" "chat_template.jinja"
echo "ok: chat_template.jinja (transformers 5 layout) read by prep and generate, ids as transformers"

# precedence: .jinja over chat_template.json over tokenizer_config.json
mkdir -p p1 p2
cp "$T5/tokenizer.json" "$T5/chat_template.jinja" p1/
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); json.dump({"chat_template": c["chat_template"]}, open(sys.argv[2],"w"))' \
    "$QWEN25_CFG" p1/chat_template.json 2>/dev/null ||
    skip "python3 is needed to write the JSON variants"
cp "$QWEN25_CFG" p1/tokenizer_config.json
prep_is_smollm2 p1 "jinja over json and config"
cp "$T5/tokenizer.json" p2/
python3 -c 'import json,sys; json.dump({"chat_template": open(sys.argv[1]).read()}, open(sys.argv[2],"w"))' \
    "$T5/chat_template.jinja" p2/chat_template.json
cp "$QWEN25_CFG" p2/tokenizer_config.json
gen_is_smollm2 p2 "chat_template.json over tokenizer_config.json"
echo "ok: chat_template.jinja > chat_template.json > tokenizer_config.json"

# transformers' list of named templates: "default" is the one used
mkdir -p named
cp "$T5/tokenizer.json" named/
python3 -c 'import json,sys; t=open(sys.argv[1]).read(); json.dump({"eos_token":"<|im_end|>","chat_template":[{"name":"tool_use","template":"{{ bos_token }}"},{"name":"default","template":t}]}, open(sys.argv[2],"w"))' \
    "$T5/chat_template.jinja" named/tokenizer_config.json
prep_is_smollm2 named "named templates"
gen_is_smollm2 named "named templates"
echo "ok: the named-template list form is read (its \"default\")"

# bad_dir NAME: a directory with the tokenizer and a bad tokenizer_config.json (made by the caller)
expect_bad() { # dir, pattern of the one line
    for tool in prep gen; do
        if [ $tool = prep ]; then
            "$PREP" -q -t "$1/tokenizer.json" -o out.h5 "$D/chat_sample.jsonl" > out.txt 2> err.txt
        else
            timeout 20 "$GEN" --tokenizer "$1/tokenizer.json" --prompt-ids hi > out.txt 2> err.txt
        fi
        rc=$?
        [ $rc -eq 2 ] || fail "$1 ($tool): exit $rc, expected 2: $(head -c 300 err.txt)"
        [ "$(wc -l < err.txt)" -eq 1 ] || fail "$1 ($tool): not one line: $(head -c 600 err.txt)"
        grep -q "$2" err.txt || fail "$1 ($tool): unexpected message: $(cat err.txt)"
    done
    echo "ok: $1: $(cat err.txt)"
}
mk() { mkdir -p "$1" && cp "$T5/tokenizer.json" "$1/"; }
mk invalid; printf '{"eos_token": "<|im_end|>",' > invalid/tokenizer_config.json
expect_bad invalid "invalid/tokenizer_config.json: line 1 column .*: invalid JSON"
mk notobj; printf '["<|im_end|>"]' > notobj/tokenizer_config.json
expect_bad notobj "notobj/tokenizer_config.json: expected a JSON object"
mk tplint; printf '{"eos_token": "<|im_end|>", "chat_template": 3}' > tplint/tokenizer_config.json
expect_bad tplint "tplint/tokenizer_config.json: chat_template: expected a string or a list"
mk nodefault; printf '{"chat_template": [{"name": "rag", "template": "x"}]}' > nodefault/tokenizer_config.json
expect_bad nodefault 'nodefault/tokenizer_config.json: chat_template: named templates without one named "default"'
mk zero; ln -s /dev/zero zero/tokenizer_config.json
expect_bad zero "zero/tokenizer_config.json: not a regular file"
mk fifo; mkfifo fifo/tokenizer_config.json
expect_bad fifo "fifo/tokenizer_config.json: not a regular file"
mk huge; truncate -s 300M huge/tokenizer_config.json
expect_bad huge "huge/tokenizer_config.json: too large"
mk badjinja; printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > badjinja/chat_template.jinja
expect_bad badjinja "badjinja/chat_template.jinja: chat_template is not one ftmpi knows.*--template"
mk badbos; printf '{"bos_token": "<nope>"}' > badbos/tokenizer_config.json
expect_bad badbos 'badbos/tokenizer_config.json: bos_token "<nope>" is not a token'

# a chat model (eos_token is a turn's end) with no template anywhere: said in one line
mk notpl; printf '{"eos_token": "<|im_end|>"}' > notpl/tokenizer_config.json
"$GEN" --tokenizer notpl/tokenizer.json --prompt-ids hi > out.txt 2> err.txt || fail "notpl: generate failed"
grep -q "note: .*notpl/tokenizer.json is a chat model's tokenizer .*no chat template" err.txt ||
    fail "notpl: no note that the chat model has no template: $(cat err.txt)"
[ "$(wc -l < err.txt)" -eq 1 ] || fail "notpl: more than one line: $(cat err.txt)"
echo "ok: a chat model prompted without a template is said in one line"

# export copies the template files: a tiny model's weights through ftmpi-convert export
CONVERT="$B/ftmpi-convert"
GENW="$B/test/generate/write_weights"
if [ -x "$GENW" ]; then
    "$GENW" w.h5 900 > /dev/null 2>&1 || fail "write_weights failed"
    cp "$T5"/* p1/ 2>/dev/null
    echo '{"max_new_tokens": 5}' > p1/generation_config.json
    "$CONVERT" export w.h5 exp --tokenizer p1 > /dev/null 2> err.txt || fail "export: $(cat err.txt)"
    for f in tokenizer.json tokenizer_config.json chat_template.jinja chat_template.json \
        generation_config.json; do
        cmp -s "p1/$f" "exp/$f" || fail "export --tokenizer did not copy $f"
    done
    echo "ok: export --tokenizer copies chat_template.jinja, chat_template.json, generation_config.json"
    # and transformers' apply_chat_template works on the exported directory (where
    # transformers is installed: a reference tool, not a dependency)
    if python3 -c "import transformers" > /dev/null 2>&1; then
        got=$(python3 -c 'import sys
from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
ids = t.apply_chat_template([{"role": "user", "content": sys.argv[2]}], add_generation_prompt=True, tokenize=True)
ids = ids["input_ids"] if hasattr(ids, "keys") else ids
print(",".join(str(i) for i in ids))' exp "$PROMPT" 2> py.err) || fail "transformers on the export: $(tail -n 3 py.err)"
        [ "$got" = "$(sm_ids)" ] || fail "the export's apply_chat_template gives $got"
        echo "ok: transformers' apply_chat_template on the exported directory gives the golden ids"
    else
        echo "note: python3 has no transformers; apply_chat_template on the export not checked"
    fi
else
    echo "note: $GENW not built; the export copy is not checked here"
fi
