#!/bin/sh
# Packing: no token lost or duplicated, document invariants (first token of each document
# masked, segments contiguous and increasing, padding masked), right shapes and counts, for
# greedy, first-fit-decreasing, one-per-row, shuffled, split and truncated data.
. "$(dirname "$0")/lib.sh"
make_corpus in.jsonl 300
T="$REAL_TOK/llama3/tokenizer.json"
run() { # NAME CHECK-FLAGS PREP-ARGS...
    name=$1 flags=$2; shift 2
    "$PREP" -t "$T" -o "$name.h5" --dump-examples "$name.jsonl" "$@" in.jsonl > "$name.log" ||
        { cat "$name.log"; fail "$name: ftmpi-prep failed"; }
    "$CHECK" "$name.h5" "$name.jsonl" $flags || fail "$name: packing check"
}
run greedy "" --seq-len 1024
run ffd --any-order --seq-len 1024 --pack ffd
run none "" --seq-len 1024 --pack none
run shuffled --any-order --seq-len 1024 --shuffle --seed 5
run trunc "" --seq-len 128
grep -q ' [1-9][0-9]* truncated' trunc.log || { cat trunc.log; fail "no truncation reported at seq-len 128"; }
"$PREP" -t "$T" -o drop.h5 --seq-len 128 --truncate drop in.jsonl > drop.log || fail "drop run"
grep -q ' [1-9][0-9]* dropped' drop.log || { cat drop.log; fail "--truncate drop dropped nothing"; }

# one row per example with --pack none; ffd never needs more rows than greedy
rows() { sed -n "s/.*: [0-9]* documents in \([0-9]*\) rows.*/\1/p" "$1" | head -n 1; }
[ "$(rows none.log)" -eq "$(wc -l < none.jsonl)" ] || fail "--pack none: rows != examples"
[ "$(rows ffd.log)" -le "$(rows greedy.log)" ] || fail "ffd uses more rows than greedy"

# train/eval split: every example in exactly one file, eval by the seed
"$PREP" -t "$T" -o tr.h5 --eval-out ev.h5 --eval-fraction 0.1 --seq-len 1024 --seed 3 \
    --dump-examples all.jsonl in.jsonl > split.log || fail "split run"
ntr=$(sed -n 's/.*tr.h5: \([0-9]*\) documents.*/\1/p' split.log)
nev=$(sed -n 's/.*ev.h5: \([0-9]*\) documents.*/\1/p' split.log)
nall=$(wc -l < all.jsonl)
[ $((ntr + nev)) -eq "$nall" ] && [ "$nev" -eq $(( (nall + 5) / 10 )) ] || { cat split.log; fail "split $ntr + $nev of $nall"; }
echo "ok: greedy $(rows greedy.log) rows, ffd $(rows ffd.log) rows, split $ntr/$nev"
