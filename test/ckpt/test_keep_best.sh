#!/bin/sh
# keep_best = true: the checkpoint with the lowest eval loss survives keep_last's
# pruning, is named in checkpoint_dir/best, and a resumed run keeps comparing against
# it. An evaluation that sets a new best on a step without a checkpoint writes one.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 5 eval.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="data.eval=eval.h5 eval_every=2 checkpoint_dir=ck keep_last=1 keep_best=true"
# save_every 0: only the final checkpoint would exist; each new best writes its own.
# checkpoint_dir "ck/" (a trailing slash, as shell completion types it): the messages
# name ck/step-000002.h5, with one slash
run_ranks 1 s.cfg $common checkpoint_dir=ck/ max_steps=4 > a.log 2>&1 || { cat a.log; fail "first run"; }
grep -q '^ftmpi: eval loss [0-9.]* at step 2 is the lowest so far: ck/step-000002.h5 is kept as the best (keep_best)$' a.log ||
    { cat a.log; fail "no best at step 2"; }
grep -q '^ftmpi: checkpoint ck/step-000002.h5 written in ' a.log ||
    { cat a.log; fail "no checkpoint line naming ck/step-000002.h5"; }
best_step() { sed -n 's/^eval *\([0-9]*\) | loss \([0-9.]*\) .*/\2 \1/p' "$@" | sort -n | head -n 1 | awk '{ print $2 }'; }
b=$(best_step a.log)
[ "$(cut -d' ' -f1 ck/best)" = "$(printf 'step-%06d.h5' "$b")" ] || { cat ck/best; fail "best is not step $b"; }
# resumed with a learning rate that wrecks the model: later evaluations are worse, so
# the best stays at step $b while keep_last=1 prunes everything else
run_ranks 1 s.cfg $common max_steps=8 save_every=2 resume=auto optimizer.lr=20 > b.log 2>&1 ||
    { cat b.log; fail "resumed run"; }
grep -q '^ftmpi: resume changes the schedule (max_steps 4 -> 8, optimizer.lr 0.01 -> 20)' b.log || { cat b.log; fail "no schedule note"; }
b2=$(best_step a.log b.log)
[ "$b2" = "$b" ] || { cat a.log b.log; fail "the wrecked run evaluated better (best $b2): test premise"; }
grep -q 'is the lowest so far' b.log && { cat b.log; fail "a worse eval after resume was taken as the best"; }
kept=$(ls ck | grep '^step-.*\.h5$' | tr '\n' ' ')
[ "$kept" = "$(printf 'step-%06d.h5' "$b") step-000008.h5 " ] || fail "kept: $kept (want the best $b and the latest)"
echo "keep_best kept step $b (lowest eval loss) beside the latest through pruning and resume"
# without keep_best the same pruning keeps only the latest
run_ranks 1 s.cfg data.eval=eval.h5 eval_every=2 checkpoint_dir=ck2 keep_last=1 max_steps=4 save_every=2 > c.log 2>&1 ||
    { cat c.log; fail "run without keep_best"; }
[ "$(ls ck2 | grep -c '^step-.*\.h5$')" -eq 1 ] && [ ! -e ck2/best ] || { ls ck2; fail "keep_best off"; }
