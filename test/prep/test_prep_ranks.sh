#!/bin/sh
# N ranks == 1 rank: the dataset files (h5diff: data and attributes), the example dump and
# the bad-record report are the same on 1, 2 and 3 ranks, for greedy and ffd packing with a
# shuffled train/eval split, for JSON Lines (with bad lines), several inputs and a JSON array.
. "$(dirname "$0")/lib.sh"
have_mpirun || skip "no mpirun"
command -v h5diff >/dev/null 2>&1 || skip "no h5diff"
make_corpus a.jsonl 250
{ head -n 40 a.jsonl; echo '{"instruction": "bad json"'; echo '[1,2]'
  sed -n '41,120p' a.jsonl; echo '{"instruction":"x","output":7}'; sed -n '121,250p' a.jsonl; } > in.jsonl
make_corpus b.jsonl 60
awk 'BEGIN { print "[" } { printf "%s%s\n", (NR > 1 ? "," : ""), $0 } END { print "]" }' b.jsonl > arr.json
T="$REAL_TOK/llama3/tokenizer.json"
for pack in greedy ffd; do
    for n in 1 2 3; do
        prep_ranks "$n" -t "$T" -o "tr$n.h5" --eval-out "ev$n.h5" --eval-fraction 0.1 --shuffle \
            --seed 11 --seq-len 512 --pack "$pack" --dump-examples "d$n.jsonl" \
            in.jsonl arr.json b.jsonl > "log$n" 2> "err$n" || { cat "err$n"; fail "$pack: $n ranks"; }
    done
    for n in 2 3; do
        h5diff tr1.h5 "tr$n.h5" >/dev/null || { h5diff tr1.h5 "tr$n.h5" | head; fail "$pack: train file, $n ranks != 1 rank"; }
        h5diff ev1.h5 "ev$n.h5" >/dev/null || fail "$pack: eval file, $n ranks != 1 rank"
        cmp -s d1.jsonl "d$n.jsonl" || fail "$pack: example dump, $n ranks != 1 rank"
        cmp -s err1 "err$n" || { diff err1 "err$n"; fail "$pack: bad-record report, $n ranks != 1 rank"; }
        h5dump -A "tr$n.h5" | grep -v HDF5 > "a$n"; h5dump -A tr1.h5 | grep -v HDF5 > a1
        cmp -s a1 "a$n" || fail "$pack: attributes differ"
    done
    grep -q 'in.jsonl:41: invalid JSON' err1 && grep -q 'in.jsonl:42: not a JSON object' err1 &&
        grep -q 'in.jsonl:123: field "output" is not a string' err1 || { cat err1; fail "bad-line numbers"; }
    echo "ok: $pack: 1, 2, 3 ranks identical ($(sed -n 's/.*tr1.h5: \([0-9]*\) documents in \([0-9]*\) rows.*/\1 docs, \2 rows/p' log1))"
done
