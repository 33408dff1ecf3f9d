#!/bin/sh
# The trainer reads what ftmpi-prep writes: a tiny model with the Llama 2 vocabulary (32000)
# trains 2 steps on a prepared Alpaca file and reports finite losses.
. "$(dirname "$0")/lib.sh"
make_corpus in.jsonl 64
"$PREP" -q -t "$REAL_TOK/llama2/tokenizer.json" --seq-len 64 --pack ffd -o train.h5 in.jsonl ||
    fail "ftmpi-prep"
write_small_cfg small.cfg
"$FTMPI" small.cfg max_steps=2 model.vocab_size=32000 model.hidden_size=32 \
    model.intermediate_size=64 model.num_attention_heads=2 model.num_key_value_heads=1 \
    > run.log 2>&1 || { cat run.log; fail "training on the prepared file"; }
losses run.log > l
[ "$(wc -l < l)" -eq 2 ] || { cat run.log; fail "expected 2 step lines"; }
awk '{ if ($1 != $1 + 0 || $1 <= 0 || $1 > 100) exit 1 }' l || { cat run.log; fail "non-finite loss"; }
echo "ok: losses $(tr '\n' ' ' < l)"
