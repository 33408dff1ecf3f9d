#!/bin/sh
# How often a training step makes the host wait for the device (each wait drains the
# GPU, which then idles while the next kernels are launched): on the CPU execution
# harness, which counts them (CUDAEMU_REPORT=1), the waits per step do not grow with the
# number of layers (the gradient norm reads every unit's sum back at once, the optimizer
# runs every unit without waiting) and stay within the few that a step needs (the
# batch's uploads, the loss read back at the end of each micro-batch, the norm, the end
# of the step). On a GPU build nothing counts them: skipped.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
require_cuda_device small.cfg
"$FTMPI" --version | grep -q "CPU execution harness" ||
    skip "not the CPU execution harness: nothing counts the waits"
waits() { # waits LAYERS STEPS
    CUDAEMU_REPORT=1 "$FTMPI" small.cfg device=cuda precision=bf16 global_batch_size=2 \
        optimizer.warmup_steps=0 model.num_hidden_layers=$1 max_steps=$2 > w.log 2>&1 ||
        { cat w.log; fail "run of $1 layers, $2 steps"; }
    sed -n 's/^cudaemu: host waits for the device: \([0-9]*\);.*/\1/p' w.log
}
per_step() { a=$(waits "$1" 2); b=$(waits "$1" 4); echo $(((b - a) / 2)); }
two=$(per_step 2)
six=$(per_step 6)
echo "host waits per step: $two with 2 layers, $six with 6"
[ -n "$two" ] && [ "$two" -gt 0 ] || fail "no wait count (CUDAEMU_REPORT)"
[ "$two" -eq "$six" ] || fail "waits per step grow with the layers: $two (2) vs $six (6)"
[ "$two" -le 14 ] || fail "$two waits per step (at most 14 expected)"
