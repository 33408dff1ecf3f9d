#!/bin/sh
# ftmpi-prep writes its output under OUT.tmp and renames it when complete: a run killed
# while writing (FTMPI_FAULT=prep:written, every rank SIGKILLed after the rows are
# written, before the rename) leaves a previous good OUT.h5 byte for byte intact, and a
# failed run removes its partial file.
. "$(dirname "$0")/lib.sh"
T="$REAL_TOK/llama3/tokenizer.json"
make_corpus c.jsonl 200
"$PREP" -t "$T" -o out.h5 --seq-len 64 "$D/alpaca_sample.jsonl" > a.log 2>&1 || { cat a.log; fail "first run"; }
before=$(cksum < out.h5)
n=1; have_mpirun && n=2
FTMPI_FAULT=prep:written prep_ranks $n -t "$T" -o out.h5 --seq-len 64 c.jsonl > k.log 2>&1 &&
    fail "the injected kill did not happen"
[ "$(cksum < out.h5)" = "$before" ] || fail "a killed run changed the previous out.h5"
echo "killed while writing on $n rank(s): the previous out.h5 is intact"
prep_ranks $n -t "$T" -o out.h5 --seq-len 64 c.jsonl > b.log 2>&1 || { cat b.log; fail "rerun"; }
[ "$(cksum < out.h5)" != "$before" ] || fail "the rerun did not replace out.h5"
[ -e out.h5.tmp ] && fail "a completed run left out.h5.tmp"
echo "a completed run replaces it and leaves no .tmp"
