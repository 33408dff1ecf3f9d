#!/bin/sh
# The optimizer's update beside the next step's forward (src/shard/engine_overlap.c):
# training with it gives bitwise the losses, gradient norms, evaluation losses, checkpoints
# (weights, master, moments) and final weights of training without it
# (FTMPI_OPTIMIZER_OVERLAP=0), in the fp32 and the bf16 recipes, with gradient
# accumulation, evaluation and checkpoints between steps and profile_phases on (the
# optimizer's span on the side lane), on 1 rank and on 2 at zero_stage 0. On the CPU
# execution harness every run is under its happens-before checker, which aborts on an
# access that no wait orders (the defects in test/cudaemu/defects.py that drop a wait are
# caught here). The start-up line says the update runs beside the forward with the switch
# on, and not with it off. In the bf16 recipe the next step's lookup reads its embedding
# rows, made first, before the embedding's update (src/shard/engine_lookup.c). (Neither step's end waits for the device any more:
# test_cuda_waits.sh.)
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 9 valid.h5 >/dev/null || fail "gendata (eval)"
write_small_cfg s.cfg
require_cuda_device s.cfg
common="device=cuda global_batch_size=8 micro_batch_size=2 max_steps=6 eval_every=3 data.eval=valid.h5 save_every=3 profile_phases=true"

# compare N TAG EXTRA...: 6 steps, evaluations and checkpoints after steps 3 and 6
compare() {
    n=$1 tag=$2; shift 2
    same_with_and_without FTMPI_OPTIMIZER_OVERLAP "$n" "$tag" 6 2 "step-000003.h5 step-000006.h5" \
        s.cfg $common "$@"
    grep -q "optimizer" "$tag.1.log" || { cat "$tag.1.log"; fail "$tag: no phase line"; }
    beside_or_not "$tag" "the optimizer's update"
}
compare 1 fp32 precision=fp32
compare 1 bf16 precision=bf16
# the bf16 recipe's lookup reads its rows of the embedding before the update has run:
# on every step that follows a step, the ones after the evaluation and the checkpoint of
# step 3 too (neither changes what the rows were made from); a defect in those rows
# changes the bits compared above
lookup_ahead() {
    line=$(grep "^ftmpi: the next step's embedding rows came before the update" "$1") ||
        { cat "$1"; fail "$1: no line on the embedding rows ahead of the update"; }
    echo "$line" | grep -q " in $2 of 5 steps" || fail "$1: $line (expected $2 of 5)"
}
lookup_ahead bf16.1.log 5
beside_or_not bf16 "the next lookup's embedding rows"
grep -q "embedding rows came before" fp32.1.log && fail "fp32: embedding rows ahead without bf16 bits"
if have_mpirun && enough_devices 2 "2 ranks at zero_stage 0"; then
    compare 2 bf16-2 precision=bf16 zero_stage=0
    lookup_ahead bf16-2.1.log 5
fi

echo "PASS"
