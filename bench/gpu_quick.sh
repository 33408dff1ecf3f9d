#!/bin/sh
# The GPU measurements that matter most, in the order they matter, for a session with a
# few minutes of GPU time (the device machines lent to this project give 15 minutes in
# all, start-up included). Each step has its own time limit and its own log; a failing or
# slow step does not stop the next one.
#   bench/gpu_quick.sh [LOGDIR]      (default: $OUT if set, else gpu-quick/)
# On the bundle's machine: bash .gpu/run.sh env FTMPI_BUILD=build-gpu sh bench/gpu_quick.sh
# Steps (seconds allowed):
#   1. correctness of the kernels that changed without a GPU: test_attention_tc (the own
#      tensor-core attention, both backwards) and test_attention_cudnn with
#      FTMPI_CUDNN_VERBOSE=1 (whether the real cuDNN takes each graph, and a deterministic
#      engine for it) (60 each);
#   2. bench/gpu_attention.sh: own kernels against SDPA's FA2, the cuDNN path against SDPA's
#      cuDNN, the two forward geometries and the two backwards (240);
#   3. bench/head.sh cuda: the LM head against PyTorch's (90);
#   4. bench/gpu_step.sh --shape 1b: the training step against HF + PyTorch (240).
# Prints one "gpu_quick: <step>: ok|FAILED|TIMEOUT (Ns)" line per step, then the logs'
# tables. Prints "no GPU" and exits 77 on a machine without one.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
logs=${1:-${OUT:-gpu-quick}}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
mkdir -p "$logs" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1
date -u +"gpu_quick: %Y-%m-%d %H:%M UTC"

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output in LOGDIR/NAME.log
step() {
    name=$1 limit=$2
    shift 2
    t0=$(date +%s)
    timeout "$limit" "$@" > "$logs/$name.log" 2>&1
    rc=$?
    t=$(($(date +%s) - t0))
    case $rc in
        0) echo "gpu_quick: $name: ok (${t}s)" ;;
        124) echo "gpu_quick: $name: TIMEOUT after ${t}s ($logs/$name.log)" ;;
        *) echo "gpu_quick: $name: FAILED, exit $rc (${t}s, $logs/$name.log)" ;;
    esac
}

step attention_tc 60 "$build/test/cuda/test_attention_tc"
step attention_cudnn 60 env FTMPI_CUDNN_VERBOSE=1 "$build/test/cuda/test_attention_cudnn"
step gpu_attention 240 env FTMPI_BUILD="$build" sh "$top/bench/gpu_attention.sh"
step head 90 env FTMPI_BUILD="$build" sh "$top/bench/head.sh" cuda
step gpu_step 240 env FTMPI_BUILD="$build" sh "$top/bench/gpu_step.sh" --shape 1b

for name in attention_tc attention_cudnn; do
    echo "== $name"
    grep -E "FAIL|checks|refused|skipped" "$logs/$name.log" | head -n 20
done
for name in gpu_attention head gpu_step; do
    echo "== $name"
    cat "$logs/$name.log"
done
