#!/bin/sh
# ChatML templates are HF-exact: the examples ftmpi-prep builds (ids and loss mask) with
# --template chatml / qwen2-chat / qwen2.5-chat on the tiny Qwen2-pipeline tokenizer equal
# test/prep/gen_golden_chatml.py's (cross-checked there against transformers'
# apply_chat_template with the real chat_template strings); without --template the tokenizer's
# chat_template picks the template and an unknown one is refused; a ChatML template on a
# tokenizer without <|im_start|>/<|im_end|> is refused. Qwen3's template (qwen3-chat) on the
# real Qwen3 tokenizer files likewise, and SmolLM2's (smollm2-chat).
. "$(dirname "$0")/lib.sh"
QTOK="$TOK/families/qwen2/tokenizer.json"
for tpl in chatml:chatml qwen2-chat:qwen2 qwen2.5-chat:qwen2.5; do
    name=${tpl%%:*} gold=$D/golden_chat_${tpl#*:}.jsonl
    "$PREP" -q -t "$QTOK" --template "$name" --seq-len 4096 -o out.h5 \
        --dump-examples got.jsonl "$D/chat_sample.jsonl" || fail "$name: ftmpi-prep failed"
    if ! cmp -s got.jsonl "$gold"; then
        diff got.jsonl "$gold" | head -n 6 >&2
        fail "$name: examples differ from the golden file (first differences above)"
    fi
    "$CHECK" out.h5 got.jsonl >/dev/null || fail "$name: packed file does not hold the examples"
    echo "ok: $name ($(wc -l < got.jsonl) examples)"
done
MTOK="$TOK/families/mistral/tokenizer.json"
for mode in "--template mistral-chat" ""; do # families/mistral/tokenizer_config.json: v0.3's template
    "$PREP" -q -t "$MTOK" $mode --seq-len 4096 -o out.h5 --dump-examples got.jsonl \
        "$D/chat_sample.jsonl" || fail "mistral ($mode): ftmpi-prep failed"
    if ! cmp -s got.jsonl "$D/golden_chat_mistral.jsonl"; then
        diff got.jsonl "$D/golden_chat_mistral.jsonl" | head -n 6 >&2
        fail "mistral ($mode): examples differ from the golden file (first differences above)"
    fi
    echo "ok: mistral-chat ${mode:-(recognised from chat_template)}"
done
# Qwen3 (real tokenizer files, test/data/tokenizers/qwen3/): <think> blocks, goldens of
# test/prep/gen_golden_qwen3.py (cross-checked there against apply_chat_template); without
# --template its tokenizer_config.json's chat_template must be recognised as qwen3-chat.
Q3TOK="$REAL_TOK/qwen3/tokenizer.json"
for mode in "--template qwen3-chat" ""; do
    "$PREP" -q -t "$Q3TOK" $mode --seq-len 4096 -o out.h5 --dump-examples got.jsonl \
        "$D/chat_sample.jsonl" "$D/chat_qwen3.jsonl" || fail "qwen3 ($mode): ftmpi-prep failed"
    if ! cmp -s got.jsonl "$D/golden_chat_qwen3.jsonl"; then
        diff got.jsonl "$D/golden_chat_qwen3.jsonl" | head -n 6 >&2
        fail "qwen3 ($mode): examples differ from the golden file (first differences above)"
    fi
    "$CHECK" out.h5 got.jsonl >/dev/null || fail "qwen3: packed file does not hold the examples"
    echo "ok: qwen3-chat ${mode:-(recognised from chat_template)}"
done
printf '%s\n' '{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","reasoning_content":3}]}' > badr.jsonl
"$PREP" -q -t "$QTOK" --template qwen3-chat --seq-len 4096 -o out.h5 badr.jsonl 2> err.txt
grep -q 'badr.jsonl:1: .*messages\[1\]: "reasoning_content" is not a string or null' err.txt ||
    fail "bad reasoning_content: unexpected error: $(cat err.txt)"
echo "ok: a non-string reasoning_content is named with its file and line"
# SmolLM2: ChatML with its default system turn, on the tiny tokenizer with SmolLM2's pipeline
# (Digits + ByteLevel), whose tokenizer_config.json holds SmolLM2-Instruct's chat_template.
STOK="$TOK/families/digits/tokenizer.json"
for mode in "--template smollm2-chat" ""; do
    "$PREP" -q -t "$STOK" $mode --seq-len 4096 -o out.h5 --dump-examples got.jsonl \
        "$D/chat_sample.jsonl" || fail "smollm2 ($mode): ftmpi-prep failed"
    if ! cmp -s got.jsonl "$D/golden_chat_smollm2.jsonl"; then
        diff got.jsonl "$D/golden_chat_smollm2.jsonl" | head -n 6 >&2
        fail "smollm2 ($mode): examples differ from the golden file (first differences above)"
    fi
    echo "ok: smollm2-chat ${mode:-(recognised from chat_template)}"
done
# families/qwen2/tokenizer_config.json holds Qwen2.5-Instruct's real chat_template.
"$PREP" -q -t "$QTOK" --seq-len 4096 -o out.h5 --dump-examples got.jsonl "$D/chat_sample.jsonl" ||
    fail "auto: ftmpi-prep failed"
cmp -s got.jsonl "$D/golden_chat_qwen2.5.jsonl" || fail "auto: Qwen2.5's chat_template was not recognised"
echo "ok: auto recognises Qwen2.5's chat_template"
mkdir -p unk
cp "$QTOK" unk/tokenizer.json
sed 's/You are Qwen, created by Alibaba Cloud/You are SmolLM/g' "$(dirname "$QTOK")/tokenizer_config.json" > unk/tokenizer_config.json
if "$PREP" -q -t unk/tokenizer.json --seq-len 4096 -o out.h5 "$D/chat_sample.jsonl" 2> err.txt; then
    fail "an unknown chat_template was accepted"
fi
grep -q 'tokenizer_config.json: chat_template is not one ftmpi knows.*name the template with --template' err.txt ||
    fail "unknown chat_template: unexpected error: $(cat err.txt)"
"$PREP" -q -t unk/tokenizer.json --template chatml --seq-len 4096 -o out.h5 --dump-examples got.jsonl \
    "$D/chat_sample.jsonl" || fail "unknown chat_template with --template chatml failed"
cmp -s got.jsonl "$D/golden_chat_chatml.jsonl" || fail "--template chatml over an unknown chat_template"
echo "ok: unknown chat_template refused in one line; --template overrides it"
if "$PREP" -q -t "$REAL_TOK/llama3/tokenizer.json" --template chatml --seq-len 4096 -o out.h5 \
    "$D/chat_sample.jsonl" 2> err.txt; then
    fail "chatml on Llama 3 was accepted"
fi
grep -q 'need <|im_start|> and <|im_end|>' err.txt || fail "chatml on Llama 3: unexpected error: $(cat err.txt)"
echo "ok: chatml refused without ChatML tokens"
