#!/bin/sh
# What a training step costs the device beyond its arithmetic, on the CPU execution
# harness, which counts it (CUDAEMU_REPORT=ops):
# - host waits: each drains the GPU, which then idles while the next kernels are
#   launched. Per step they do not grow with the number of layers (the gradient norm
#   reads every unit's sum back at once, the optimizer runs every unit without waiting)
#   and stay within the two a step needs: the loss read back at the end of each
#   micro-batch (into pinned memory: the synchronisation is the one wait) and the
#   gradient norm. The step's end does not wait: the optimizer's update runs beside the
#   next step's forward (src/shard/engine_overlap.c), and at ZeRO stages 1-3 the step
#   returns without a wait too (stages 1-2: each unit's parameter all-gather is waited
#   for by the next forward, on the device). The batch's uploads take none (pinned
#   staging: cuda/cuda_upload_stage.h);
# - device operations (kernels, library calls, copies, sets): each is a launch and a
#   kernel boundary. Per layer, a step of this Llama-shaped model takes at most 44 (its
#   GEMMs, K and V and gate and up as one strided batch each, forward and weight
#   gradients: matmul_pair; norms, their backward in two launches; RoPE of q and k in one
#   launch, attention, SwiGLU, none in the recompute; one AdamW launch),
#   and no device-to-device copy: the residual sums happen in the GEMMs' and the norms'
#   backward (backend.h, matmul_add and dx_base), not after copies.
# On a GPU build nothing counts them: skipped.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
require_cuda_device small.cfg
"$FTMPI" --version | grep -q "CPU execution harness" ||
    skip "not the CPU execution harness: nothing counts the waits"
run() { # run LAYERS STEPS [ARGS...]: the harness's report into r.LAYERS.STEPS
    l=$1 n=$2; shift 2
    CUDAEMU_REPORT=ops "$FTMPI" small.cfg device=cuda precision=bf16 global_batch_size=2 \
        optimizer.warmup_steps=0 model.num_hidden_layers=$l max_steps=$n "$@" > "r.$l.$n" 2>&1 ||
        { cat "r.$l.$n"; fail "run of $l layers, $n steps $*"; }
}
# per_step LAYERS SED: the count the sed script prints, per step (steps 3 and 4)
per_step() {
    a=$(sed -n "$2" "r.$1.2"); b=$(sed -n "$2" "r.$1.4")
    echo $(((${b:-0} - ${a:-0}) / 2))
}
WAITS='s/^cudaemu: host waits for the device: \([0-9]*\);.*/\1/p'
for stage in 1 2 3; do
    run 2 2 zero_stage=$stage; run 2 4 zero_stage=$stage
    w=$(per_step 2 "$WAITS")
    echo "host waits per step at zero_stage $stage: $w"
    [ -n "$w" ] && [ "$w" -gt 0 ] && [ "$w" -le 2 ] || fail "$w waits per step at zero_stage $stage (at most 2 expected)"
done
for layers in 2 6; do run $layers 2; run $layers 4; done
OPS='s/^cudaemu: host waits .*; device operations: \([0-9]*\)$/\1/p'
D2D='s/^cudaemu: *\([0-9]*\) x cudaMemcpyAsync(DeviceToDevice)$/\1/p'
two=$(per_step 2 "$WAITS")
six=$(per_step 6 "$WAITS")
echo "host waits per step: $two with 2 layers, $six with 6"
[ -n "$two" ] && [ "$two" -gt 0 ] || fail "no wait count (CUDAEMU_REPORT)"
[ "$two" -eq "$six" ] || fail "waits per step grow with the layers: $two (2) vs $six (6)"
[ "$two" -le 2 ] || fail "$two waits per step (at most 2 expected)"
ops2=$(per_step 2 "$OPS")
ops6=$(per_step 6 "$OPS")
[ -n "$ops2" ] && [ "$ops2" -gt 0 ] || fail "no device operation count (CUDAEMU_REPORT)"
per_layer=$(((ops6 - ops2) / 4))
echo "device operations per step: $ops2 with 2 layers, $ops6 with 6: $per_layer a layer"
[ "$per_layer" -le 44 ] || { grep ' x ' r.6.4; fail "$per_layer device operations a layer (at most 44 expected)"; }
d2d2=$(per_step 2 "$D2D")
d2d6=$(per_step 6 "$D2D")
echo "device-to-device copies per step: $d2d2 with 2 layers, $d2d6 with 6"
[ "$d2d2" -eq "$d2d6" ] || fail "device-to-device copies per step grow with the layers"
