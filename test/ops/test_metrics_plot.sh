#!/bin/sh
# The metrics file has one valid JSON record per step and per evaluation with the
# logged values, and ftmpi-plot turns it into a PNG (skipped without gnuplot).
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 5 eval.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
run_ranks 1 s.cfg max_steps=6 global_batch_size=4 micro_batch_size=2 data.eval=eval.h5 eval_every=3 \
    metrics_file=m.jsonl > r.log 2>&1 || { cat r.log; fail "run"; }
[ "$(grep -c '"kind":"step"' m.jsonl)" -eq 6 ] || fail "expected 6 step records"
[ "$(grep -c '"kind":"eval"' m.jsonl)" -eq 2 ] || fail "expected 2 eval records"
# every record parses as JSON and the losses equal the log's (to its 4 decimals)
python3 -c 'import json,sys; [json.loads(l) for l in open("m.jsonl")]' 2>/dev/null ||
    { command -v python3 >/dev/null && fail "invalid JSON in the metrics file"; }
sed -n 's/.*"kind":"step".*"loss":\([0-9.e+-]*\),.*/\1/p' m.jsonl | awk '{ printf "%.4f\n", $1 }' > lm
losses r.log > ll
cmp -s lm ll || { paste lm ll; fail "metrics losses differ from the log"; }
command -v gnuplot >/dev/null 2>&1 || skip "gnuplot not installed (metrics checked)"
"$S/scripts/ftmpi-plot" m.jsonl plot.png > p.log 2>&1 || { cat p.log; fail "ftmpi-plot"; }
[ "$(head -c 8 plot.png | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "not a PNG"
echo "metrics file and plot ok"
