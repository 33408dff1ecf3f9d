#!/bin/sh
# keep_last orders checkpoints by their step as a number: across step 999,999 ->
# 1,000,000 (step-1000000.h5 sorts before step-999999.h5 as text) the newest checkpoint
# stays and `latest` names an existing file. The run stands in for a million steps by
# resuming from a checkpoint whose /meta step says 999,998 (test helper ckpt_set_meta).
. "$(dirname "$0")/../train/lib.sh"
SETMETA="$B/test/ckpt/ckpt_set_meta"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 checkpoint_dir=ck"
run_ranks 1 s.cfg $common max_steps=2 > a.log 2>&1 || { cat a.log; fail "first run"; }
"$SETMETA" ck/step-000002.h5 step 999998 || fail "set step"
"$SETMETA" ck/step-000002.h5 optimizer_step 999998 || fail "set optimizer_step"
run_ranks 1 s.cfg $common max_steps=1000000 save_every=1 keep_last=1 resume=auto > p.log 2>&1 ||
    { cat p.log; fail "run across step 1,000,000"; }
grep -q "resumed from ck/step-000002.h5 at step 999998" p.log || { cat p.log; fail "did not resume at 999998"; }
[ "$(cat ck/latest)" = "step-1000000.h5" ] || fail "latest is $(cat ck/latest)"
[ -f ck/step-1000000.h5 ] || { ls ck; fail "the newest checkpoint was pruned"; }
[ "$(ls ck | grep -c '^step-.*\.h5$')" -eq 1 ] || { ls ck; fail "keep_last=1 kept $(ls ck | grep -c h5)"; }
echo "keep_last=1 across step 1,000,000: kept step-1000000.h5"
# a stray file with a larger number than `latest` (e.g. copied in by hand) never makes
# the pruner delete the checkpoint `latest` names
cp ck/step-1000000.h5 ck/step-9999999.h5
run_ranks 1 s.cfg $common max_steps=1000001 save_every=1 keep_last=1 resume=auto > q.log 2>&1 ||
    { cat q.log; fail "run with a stray newer file"; }
[ -f "ck/$(cat ck/latest)" ] || { ls ck; fail "latest names a deleted file"; }
echo "a stray newer-named file does not cost the latest checkpoint"
