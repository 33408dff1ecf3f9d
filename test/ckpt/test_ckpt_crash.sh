#!/bin/sh
# Crash safety: every rank is killed (SIGKILL) at several points of writing the step-4
# checkpoint (FTMPI_FAULT=ckpt:<phase>, a test hook in src/train/checkpoint.c): after
# the file is created, after the model tensors, after the collective close, after the
# rename but before `latest` moves. Each time `latest` still names a complete,
# loadable checkpoint and resume = "auto" continues from it.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 zero_stage=2 optimizer.warmup_steps=1 checkpoint_dir=ck"
n=1; have_mpirun && n=2
for phase in created model closed renamed; do
    rm -rf ck
    run_ranks $n s.cfg $common max_steps=2 > a.log 2>&1 || { cat a.log; fail "first checkpoint"; }
    FTMPI_FAULT=ckpt:$phase run_ranks $n s.cfg $common max_steps=4 resume=auto > k.log 2>&1 &&
        fail "$phase: the injected kill did not happen"
    [ "$(cat ck/latest)" = "step-000002.h5" ] || fail "$phase: latest moved to an incomplete checkpoint"
    run_ranks $n s.cfg $common max_steps=3 resume=auto > r.log 2>&1 || { cat r.log; fail "$phase: resume after crash"; }
    grep -q "resumed from ck/step-000002.h5 at step 2" r.log || { cat r.log; fail "$phase: did not resume from step 2"; }
    echo "killed at '$phase': previous checkpoint intact and resumed"
done
# keep_last prunes old checkpoints, never the latest
rm -rf ck
run_ranks 1 s.cfg $common max_steps=5 save_every=1 keep_last=2 > p.log 2>&1 || { cat p.log; fail "keep_last run"; }
[ "$(ls ck | grep -c '^step-.*\.h5$')" -eq 2 ] || { ls ck; fail "keep_last=2 kept $(ls ck | grep -c h5)"; }
[ -f "ck/$(cat ck/latest)" ] || fail "latest points at a pruned file"
echo "keep_last ok"
