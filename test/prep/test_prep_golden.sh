#!/bin/sh
# Tokenization is HF-exact: the examples ftmpi-prep builds (ids and loss mask, before packing)
# equal those of test/prep/gen_golden.py (HF `tokenizers` + the templates of doc/prep.md), for
# the Alpaca and chat samples with the Llama 3 and Llama 2 tokenizers.
. "$(dirname "$0")/lib.sh"
for tk in llama3 llama2; do
    for smp in alpaca chat; do
        "$PREP" -q -t "$REAL_TOK/$tk/tokenizer.json" --seq-len 4096 -o out.h5 \
            --dump-examples got.jsonl "$D/${smp}_sample.jsonl" || fail "$smp/$tk: ftmpi-prep failed"
        if ! cmp -s got.jsonl "$D/golden_${smp}_$tk.jsonl"; then
            diff got.jsonl "$D/golden_${smp}_$tk.jsonl" | head -n 6 >&2
            fail "$smp/$tk: examples differ from the golden file (first differences above)"
        fi
        "$CHECK" out.h5 got.jsonl >/dev/null || fail "$smp/$tk: packed file does not hold the examples"
        echo "ok: $smp $tk ($(wc -l < got.jsonl) examples)"
    done
done
