#!/bin/sh
# On device = "cuda" the MFU peak comes from the datasheet table by the name the driver
# reports (cudaGetDeviceProperties; the harness's stand-ins name an A100 SXM4 or an H100
# SXM with "(cudaemu)" appended), in the recipe's column: bf16 for precision = "bf16",
# plain fp32 (no TF32) for "fp32"; the step line then shows a figure. A GPU missing from
# the table shows "mfu -" and one line naming the device.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
require_cuda_device small.cfg
one="device=cuda max_steps=1 global_batch_size=2 optimizer.warmup_steps=0"
for precision in bf16 fp32; do
    "$FTMPI" small.cfg $one precision=$precision > $precision.log 2>&1 ||
        { cat $precision.log; fail "$precision run"; }
    line=$(grep '^ftmpi: MFU' $precision.log)
    echo "$precision: $line"
    case "$line" in
    *"not in ftmpi's peak table"*)
        grep -q "| mfu - |" $precision.log || fail "$precision: a figure without a peak";;
    *"table row "*", dense $precision"*"for \"NVIDIA "*)
        grep -Eq "\| mfu [0-9.]+% \|" $precision.log || fail "$precision: no figure";;
    *) fail "$precision: the peak line names no table row or not the $precision column";;
    esac
done
if [ "${CUDAEMU_DEVICE:-a100}" = a100 ] && grep -q '(cudaemu)' bf16.log; then
    grep -q '^ftmpi: MFU peak 312 TFLOP/s per rank (table row A100 SXM, dense bf16' bf16.log ||
        fail "the harness's A100 is not the A100 SXM row"
    grep -q '^ftmpi: MFU peak 19.5 TFLOP/s per rank (table row A100 SXM, dense fp32' fp32.log ||
        fail "the fp32 recipe is not the fp32 column"
fi
