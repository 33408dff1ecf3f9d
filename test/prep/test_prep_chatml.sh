#!/bin/sh
# ChatML templates are HF-exact: the examples ftmpi-prep builds (ids and loss mask) with
# --template chatml / qwen2-chat / qwen2.5-chat on the tiny Qwen2-pipeline tokenizer equal
# test/prep/gen_golden_chatml.py's (cross-checked there against transformers'
# apply_chat_template with the real chat_template strings); auto picks chatml for a tokenizer
# with <|im_start|>/<|im_end|>, and a ChatML template on a tokenizer without them is refused.
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
"$PREP" -q -t "$QTOK" --seq-len 4096 -o out.h5 --dump-examples got.jsonl "$D/chat_sample.jsonl" ||
    fail "auto: ftmpi-prep failed"
cmp -s got.jsonl "$D/golden_chat_chatml.jsonl" || fail "auto: a ChatML tokenizer did not get chatml"
echo "ok: auto picks chatml"
if "$PREP" -q -t "$TOK/llama3/tokenizer.json" --template chatml --seq-len 4096 -o out.h5 \
    "$D/chat_sample.jsonl" 2> err.txt; then
    fail "chatml on Llama 3 was accepted"
fi
grep -q 'need <|im_start|> and <|im_end|>' err.txt || fail "chatml on Llama 3: unexpected error: $(cat err.txt)"
echo "ok: chatml refused without ChatML tokens"
