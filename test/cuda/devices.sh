# Device count for the device = "cuda" shell tests (sourced after test/train/lib.sh). ftmpi
# binds rank r to device r of its node, so a case on N ranks needs N devices: on a machine
# with fewer (one GPU, say) that case is skipped with its reason and the rest of the test
# runs. The count is the CUDA runtime's (test/cuda/cuda_device_count); under the CPU
# execution harness it is the emulated count (CUDAEMU_DEVICES, default 8): every case runs.
[ -x "$B/test/cuda/cuda_device_count" ] ||
    { echo "ERROR: $B/test/cuda/cuda_device_count is not built (make check builds it)"; exit 99; }
CUDA_DEVICES=$("$B/test/cuda/cuda_device_count" 2>/dev/null) || CUDA_DEVICES=0
case $CUDA_DEVICES in ''|*[!0-9]*) CUDA_DEVICES=0;; esac

# enough_devices N WHAT: true when N ranks can each have a device; otherwise prints
# "skipped: WHAT: ..." and is false (callers write `if enough_devices 2 "..."; then`).
enough_devices() {
    [ "$CUDA_DEVICES" -ge "$1" ] && return 0
    echo "skipped: $2: needs $1 CUDA devices, this machine has $CUDA_DEVICES"
    return 1
}
