#!/bin/sh
# A checkpoint written by 4 ranks at stage 3 (the job then killed) is read by 1, 2 and
# 3 ranks at other
# stages (each rank reads its own slices of the full-shape tensors) and training
# continues as it would have on 4 ranks: the same losses to relative 2e-5 and final
# weights to 1e-4 (fp32 summation order differs with the rank count).
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 128 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=12 micro_batch_size=1 optimizer.warmup_steps=2 optimizer.schedule=linear"
run_ranks 4 s.cfg $common zero_stage=3 max_steps=6 final_weights=straight.h5 > a.log 2>&1 || { cat a.log; fail "straight"; }
losses a.log | tail -n 3 > la
FTMPI_FAULT=ckpt:saved run_ranks 4 s.cfg $common zero_stage=3 max_steps=6 save_every=3 checkpoint_dir=ck > b.log 2>&1 &&
    { cat b.log; fail "writer: not killed after its checkpoint"; }
for spec in "1 0" "2 1" "3 2" "3 3"; do
    set -- $spec
    n=$1 stage=$2
    run_ranks $n s.cfg $common zero_stage=$stage max_steps=6 resume=ck/step-000003.h5 final_weights=r.h5 > c.log 2>&1 ||
        { cat c.log; fail "$n ranks stage $stage: resume"; }
    losses c.log > lc
    same_losses lc la 2e-5 || fail "$n ranks stage $stage: losses differ from the 4-rank run"
    h5diff -d 1e-4 straight.h5 r.h5 /model /model > d.log 2>&1 || { head d.log; fail "$n ranks stage $stage: weights"; }
    echo "written by 4 ranks, resumed on $n ranks at stage $stage: ok"
done
