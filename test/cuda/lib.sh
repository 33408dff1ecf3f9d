# Helpers for the device = "cuda" end-to-end tests (sourced after test/train/lib.sh). They
# run on a GPU, or on the CPU execution harness (./configure --with-cuda-emulation), and
# skip in builds without the CUDA backend or on machines where it finds no device.
"$FTMPI" --version 2>/dev/null | grep -q "backends:.*cuda" || skip "this build has no CUDA backend"
# FT_CUDA_ONLY="test_cuda_train ...": run only those (CI's sanitizer stage; the main stage runs all)
cuda_named || skip "not in FT_CUDA_ONLY ($FT_CUDA_ONLY)"
. "$S/test/cuda/devices.sh"   # enough_devices N WHAT: multi-rank cases skip on fewer devices

# require_cuda_device CFG: skips unless one step on device = "cuda" starts.
require_cuda_device() {
    "$FTMPI" "$1" device=cuda max_steps=1 optimizer.warmup_steps=0 > probe.log 2>&1 && return 0
    grep -q "no usable CUDA device" probe.log && skip "no CUDA device (and not an emulation build)"
    cat probe.log
    fail "device = cuda does not run"
}

# final_loss LOG: the last step's loss
final_loss() { losses "$1" | tail -n 1; }
