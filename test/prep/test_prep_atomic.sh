#!/bin/sh
# ftmpi-prep writes its output under OUT.tmp and renames it when complete: a run killed
# while writing (FTMPI_FAULT=prep:written, every rank SIGKILLed after the rows are
# written, before the rename) leaves a previous good OUT.h5 byte for byte intact, and a
# failed run removes its partial file. The same holds for the --dump-examples file
# (FTMPI_FAULT=prep:dumped kills every rank after the dump is written, before its rename).
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

# --dump-examples: the same through DUMP.tmp (rank 0 creates it, every rank appends its chunk)
"$PREP" -t "$T" -o out.h5 --seq-len 64 --dump-examples d.jsonl "$D/alpaca_sample.jsonl" > d.log ||
    fail "dump run"
dump_before=$(cksum < d.jsonl); out_before=$(cksum < out.h5)
examples=$(sed -n 's/.* records: \([0-9]*\) examples,.*/\1/p' d.log)
[ -n "$examples" ] && [ "$(wc -l < d.jsonl)" -eq "$examples" ] || { cat d.log; fail "dump: one line per example"; }
FTMPI_FAULT=prep:dumped prep_ranks $n -q -t "$T" -o out.h5 --seq-len 64 --dump-examples d.jsonl c.jsonl \
    > k.log 2>&1 && fail "the injected kill (prep:dumped) did not happen"
[ "$(cksum < d.jsonl)" = "$dump_before" ] || fail "a run killed while dumping changed the previous d.jsonl"
[ "$(cksum < out.h5)" = "$out_before" ] || fail "a run killed while dumping changed out.h5"
[ -s d.jsonl.tmp ] || fail "the killed run's dump was not written under d.jsonl.tmp"
echo "killed after dumping on $n rank(s): the previous d.jsonl is intact"
# a dump that cannot be written: one line naming it, exit 1, the previous file intact
rm -f d.jsonl.tmp && mkdir d.jsonl.tmp
prep_ranks $n -q -t "$T" -o out.h5 --seq-len 64 --dump-examples d.jsonl c.jsonl > f.log 2>&1 &&
    fail "a dump over a directory d.jsonl.tmp succeeded"
[ "$(grep -c '^ftmpi-prep: ' f.log)" -eq 1 ] && grep -q 'd\.jsonl\.tmp' f.log || { cat f.log; fail "dump failure message"; }
[ "$(cksum < d.jsonl)" = "$dump_before" ] || fail "a failed dump changed the previous d.jsonl"
rmdir d.jsonl.tmp
# a completed run (n ranks) replaces it with what one rank writes, and leaves no .tmp
"$PREP" -q -t "$T" -o one.h5 --seq-len 64 --dump-examples one.jsonl c.jsonl || fail "1-rank dump"
prep_ranks $n -q -t "$T" -o out.h5 --seq-len 64 --dump-examples d.jsonl c.jsonl > b.log 2>&1 ||
    { cat b.log; fail "dump rerun"; }
cmp -s d.jsonl one.jsonl || fail "the $n-rank dump differs from the 1-rank dump"
[ -e d.jsonl.tmp ] && fail "a completed run left d.jsonl.tmp"
echo "a completed run replaces the dump and leaves no .tmp"
