#!/bin/sh
# num_epochs instead of max_steps: max_steps = ceil(num_epochs x rows / global batch),
# the step line shows the epoch (samples done / rows), the same as a max_steps run of
# that length (identical losses); a warmup longer than the derived run is refused in one
# line; max_steps together with num_epochs is refused.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
sed -i '/^max_steps/d' s.cfg
# 64 rows, global batch 8: 1.5 epochs = 12 steps
run_ranks 1 s.cfg num_epochs=1.5 metrics_file=m.jsonl > e.log 2>&1 || { cat e.log; fail "num_epochs run"; }
grep -q '^step     12/12 | epoch 1.50/1.5 | loss' e.log || { cat e.log; fail "12 steps, epoch 1.50 at the end"; }
grep -q '^step      8/12 | epoch 1.00/1.5 | loss' e.log || { cat e.log; fail "epoch 1.00 at step 8"; }
[ "$(grep -c '^step ' e.log)" -eq 12 ] || fail "not 12 step lines"
grep -q '"step":12,.*"epoch":1.5,' m.jsonl || fail "epoch missing from the metrics file"
run_ranks 1 s.cfg max_steps=12 > s.log 2>&1 || { cat s.log; fail "max_steps run"; }
grep -q '| epoch' s.log && fail "epoch shown without num_epochs"
losses e.log > le; losses s.log > ls
cmp -s le ls || { paste le ls; fail "num_epochs=1.5 trains differently from max_steps=12"; }
echo "num_epochs 1.5 = 12 steps, epochs shown"
# a fraction of an epoch rounds up: 0.2 x 64 / 8 = 1.6 -> 2 steps
run_ranks 1 s.cfg num_epochs=0.2 > f.log 2>&1 || { cat f.log; fail "num_epochs=0.2"; }
grep -q '^step      2/2 ' f.log || { cat f.log; fail "0.2 epochs should be 2 steps"; }
# warmup_steps 2 > the 1 step of 0.1 epochs: one line, exit 2
run_ranks 1 s.cfg num_epochs=0.1 > w.log 2>&1; rc=$?
[ $rc -eq 2 ] || { cat w.log; fail "warmup beyond the derived steps: exit $rc"; }
[ "$(wc -l < w.log)" -eq 1 ] && grep -q 'optimizer.warmup_steps.*greater than the 1 steps of num_epochs 0.1 (64 rows of train.h5 in global batches of 8)' w.log ||
    { cat w.log; fail "warmup message"; }
run_ranks 1 s.cfg num_epochs=1 max_steps=3 > b.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'give max_steps or num_epochs, not both' b.log || { cat b.log; fail "both given: exit $rc"; }
echo "num_epochs checks: warmup, both keys"
