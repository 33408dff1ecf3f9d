#!/bin/sh
# A full disk while a checkpoint is written, on 2 ranks: the ranks agree on the failure
# (no MPI_ERR_TRUNCATE, no ORTE_ERROR_LOG, no MPI_ABORT), one line says the file system
# is full and where, the partial .tmp file is gone, and the previous checkpoint stays
# `latest`. The disk is a 2.2 MB tmpfs: room for one checkpoint (1.5 MB), not two.
# Needs root (mount); SKIP otherwise.
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "no mpirun"
mkdir small
mount -t tmpfs -o size=2200k tmpfs small 2>/dev/null || skip "cannot mount a tmpfs (needs root)"
trap 'umount "$SCRATCH/small"; rm -rf "$SCRATCH"' EXIT
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
# checkpoint_dir with a trailing slash (shell completion adds one): one slash in every path
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 checkpoint_dir=small/ck/"
for i in 1 2 3; do
    rm -rf small/ck
    run_ranks 2 s.cfg $common max_steps=3 save_every=1 > f.log 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat f.log; fail "run $i: exit $rc, not 1"; }
    grep -E "MPI_ERR|ORTE_ERROR_LOG|MPI_ABORT|Segmentation" f.log && fail "run $i: the ranks fell out of step"
    [ "$(grep -c '^ftmpi: .*file system full' f.log)" -eq 1 ] || { cat f.log; fail "run $i: not one 'file system full' line"; }
    grep -q "small/ck/step-000002.h5.tmp (removed); small/ck/latest still names step-000001.h5: free space" f.log ||
        { cat f.log; fail "run $i: message does not say what is left"; }
    ls small/ck | grep -q '\.tmp$' && { ls small/ck; fail "run $i: partial file left"; }
    [ "$(cat small/ck/latest)" = "step-000001.h5" ] || fail "run $i: latest moved"
done
echo "disk full at step 2 on 2 ranks, 3 of 3 runs: one line, partial file removed, step 1 stays latest"
# the checkpoint left as latest loads (every content hash checked)
run_ranks 2 s.cfg $common max_steps=1 resume=auto > r.log 2>&1 || { cat r.log; fail "loading latest after disk full"; }
grep -q "resumed from small/ck/step-000001.h5 at step 1" r.log || { cat r.log; fail "did not load step 1"; }
echo "latest (step 1) loads"
