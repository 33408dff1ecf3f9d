#!/bin/sh
# ShareGPT-style records ({"conversations": [{"from": human|gpt|system, "value"}]}) are
# chat records: sharegpt_sample.jsonl holds chat_sample.jsonl's conversations in that
# form (one record spelling the speakers user/assistant), and ftmpi-prep gives identical
# examples (ids and mask) for both, found by --format auto and by --format sharegpt,
# equal to the HF-made golden file. Bad entries are reported as FILE:LINE: problem.
. "$(dirname "$0")/lib.sh"
for tk in llama3 llama2; do
    "$PREP" -q -t "$REAL_TOK/$tk/tokenizer.json" --seq-len 4096 -o m.h5 --dump-examples msg.jsonl \
        "$D/chat_sample.jsonl" || fail "$tk: messages records"
    for fmt in auto sharegpt; do
        "$PREP" -q -t "$REAL_TOK/$tk/tokenizer.json" --seq-len 4096 -o s.h5 --format $fmt \
            --dump-examples sg.jsonl "$D/sharegpt_sample.jsonl" || fail "$tk: ShareGPT records (--format $fmt)"
        cmp -s msg.jsonl sg.jsonl || { diff msg.jsonl sg.jsonl | head -n 6; fail "$tk --format $fmt: ShareGPT ids differ from messages ids"; }
    done
    cmp -s sg.jsonl "$D/golden_chat_$tk.jsonl" || fail "$tk: ShareGPT examples differ from the golden file"
    echo "ok: $tk, $(wc -l < sg.jsonl) ShareGPT records = their messages records = golden"
done
{
    echo '{"conversations":[{"from":"human","value":"a"},{"from":"gpt","value":"b"}]}'
    echo '{"conversations":[{"from":"tool","value":"a"},{"from":"gpt","value":"b"}]}'
    echo '{"conversations":[{"from":"human","text":"a"}]}'
    echo '{"conversations":[]}'
} > bad.jsonl
"$PREP" -t "$REAL_TOK/llama3/tokenizer.json" -o out.h5 --seq-len 64 bad.jsonl > out.log 2> err.log || { cat err.log; fail "bad lines must be skipped"; }
for want in 'bad.jsonl:2: conversations\[0\]: from "tool" is not human, gpt or system' \
    'bad.jsonl:3: conversations\[0\] is not an object with string "from" and "value"' \
    'bad.jsonl:4: field "conversations" is not a non-empty array'; do
    grep -q "^$want" err.log || { cat err.log; fail "not reported: $want"; }
done
echo "bad ShareGPT entries reported with file and line"
