#!/bin/sh
# The GPU measurements that matter most, in the order they matter, for a session with a
# few minutes of GPU time (the device machines lent to this project give 15 minutes in
# all, start-up included, and 10 minutes a command). Each step has its own time limit and
# its own log, and all of them share one budget (GPU_QUICK_BUDGET seconds, default 460):
# a step never gets more than what is left of it, so the script ends inside a command's
# limit; a failing or slow step does not stop the next one.
#   bench/gpu_quick.sh [LOGDIR]      (default: $OUT if set, else gpu-quick/)
# On the bundle's machine: bash .gpu/run.sh env FTMPI_BUILD=build-gpu sh bench/gpu_quick.sh
# Steps (seconds allowed):
#   0. what the build is and links on this machine (its device code's architectures,
#      cuDNN's library and version) (10);
#   1. correctness of the kernels that changed without a GPU: test_attention_tc (the own
#      tensor-core attention, both backwards, every tile switch, and on Hopper the wgmma
#      kernels) (90) and test_attention_cudnn with FTMPI_CUDNN_VERBOSE=1 (whether the real
#      cuDNN takes each graph, and a deterministic engine for it) (45);
#   1b. every test program of the build's test/cuda, then the 1-GPU cases of the cuda
#      shell tests (train, resume, overlap, generate, plan): the last line of each (180);
#   2. bench/gpu_step.sh --shape 1b: the training step against HF + PyTorch (200); where
#      it fails, again with the own attention kernels (FTMPI_CUDNN_ATTENTION=off) (150);
#      then ftmpi alone with its optimizer after the step instead of beside the next
#      forward (FTMPI_OPTIMIZER_OVERLAP=0: what the overlap gains) (60);
#      then both without checkpointing (--no-checkpointing: the 1B model fits without it) (150);
#      then ftmpi alone with FTMPI_GRADS_ZERO_ALL=1 (gradient resets zeroing everything, the
#      GEMMs adding to the zeros: what the unset 2-D part saves) (60);
#   3. bench/head.sh cuda: the LM head against PyTorch's (60); bench/gpu_profile.sh 2: the
#      step's kernel times by kind under Nsight Compute (120); bench/gpu_timeline.sh: the
#      whole 1B step's idle time between operations, recorded by CUPTI (90);
#   4. bench/gpu_attention.sh: own kernels against SDPA's FA2, the cuDNN path against SDPA's
#      cuDNN, each tile switch of the own kernels beside its default (forward rows and key
#      tiles; the backward's passes, its 128-key block and its shared layout; the wgmma
#      forward and backward) (300);
#   5. with what is left: test_cuda_ops (60), then compute-sanitizer's racecheck on
#      test_attention_tc, then ftmpi's step alone with half its 16 blocks checkpointed
#      (checkpoint_layers=8: what memory buys back of the recompute) (60), then with every
#      block checkpointed but keeping its attention half (checkpoint_keep_attention=true:
#      only the MLP half recomputed) (60), then keeping only attention's output
#      (checkpoint_keep_attention_output=true: the recompute without attention) (60),
#      then the default step with the next lookup's embedding rows no longer made before
#      the embedding's update (FTMPI_LOOKUP_AHEAD=0: what that gains) (60),
#      then ftmpi alone with its optimizer offloaded to the host (offload_optimizer=true)
#      with the copies overlapping the host's update through page-locked memory (90) and
#      without (FTMPI_OFFLOAD_OVERLAP=0: one unit at a time, pageable) (90),
#      then Nsight Compute inside the own attention
#      kernels at head_dim 128, per-instruction warp sampling included
#      (bench/gpu_attention_profile.sh) (150).
# GPU_QUICK_STEPS="name ..." runs only the steps named (the names of the lines printed),
# in the order above, for a session that measured the others already. Three steps run only
# when named there: attention_profile_shared, the profile of step 5 with the backward in
# its shared layout (FTMPI_TC_BWD_LAYOUT=shared) (150); attention_profile_wgmma, the same
# for the kernels on Hopper's warpgroup MMA (FTMPI_TC_FWD_WGMMA=1, FTMPI_TC_BWD_WGMMA=1)
# (150); first_run, scripts/gpu-first-run.sh
# on the build (compute-sanitizer's four tools on test_cuda_ops, the test programs and
# cuda shell tests, two training steps under memcheck: several minutes) (540).
# cuDNN: the machine's own libcudnn.so.9 goes first in LD_LIBRARY_PATH (bench/gpu_env.sh).
# Prints one "gpu_quick: <step>: ok|FAILED|TIMEOUT|SKIPPED (Ns)" line per step, then the
# logs' tables. Prints "no GPU" and exits 77 on a machine without one.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
# absolute: the cuda shell tests run from a directory of their own (a relative build
# directory made them skip "no CUDA backend" on an H100)
build=$(cd "$build" 2>/dev/null && pwd) || build=${FTMPI_BUILD:-$top/build}
logs=${1:-${OUT:-gpu-quick}}
budget=${GPU_QUICK_BUDGET:-460}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
mkdir -p "$logs" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1
date -u +"gpu_quick: %Y-%m-%d %H:%M UTC"
# On compute capability 9.0 the wgmma kernels are in the build only with sm_90a code
# (configure's NVCC_ARCH): without it their switches fall back silently and the wgmma
# columns of gpu_attention.sh print '*'. Said first, from the device code ftmpi --version
# names, so that a session can rebuild before spending its minutes.
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
if [ "$cc" = 9.0 ]; then
    archs=$("$build/ftmpi" --version 2>/dev/null | sed -n 's/^backends: .*device code: \([^;)]*\).*/\1/p')
    case " $archs " in
    *" sm_90a "*) echo "gpu_quick: the build has sm_90a code: the wgmma kernels are in it";;
    *) echo "gpu_quick: WARNING: the build in $build has no sm_90a code (device code: ${archs:-unknown}): the wgmma kernels are left out; reconfigure with NVCC_ARCH=\"-gencode arch=compute_90a,code=sm_90a\"";;
    esac
fi
start=$(date +%s)
. "$top/bench/gpu_env.sh"

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit (SECONDS, or what is left of
# the budget if less), its output in LOGDIR/NAME.log; the last status in $last
last=0
step() {
    name=$1 limit=$2
    shift 2
    case " ${GPU_QUICK_STEPS:-$name} " in *" $name "*) ;; *) last=0; return;; esac
    left=$((budget - ($(date +%s) - start)))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        echo "gpu_quick: $name: SKIPPED (the budget of ${budget}s is spent)"
        last=1
        return
    fi
    t0=$(date +%s)
    timeout "$limit" "$@" > "$logs/$name.log" 2>&1
    last=$?
    t=$(($(date +%s) - t0))
    case $last in
        0) echo "gpu_quick: $name: ok (${t}s)" ;;
        124) echo "gpu_quick: $name: TIMEOUT after ${t}s ($logs/$name.log)" ;;
        *) echo "gpu_quick: $name: FAILED, exit $last (${t}s, $logs/$name.log)" ;;
    esac
}

step linkage 10 sh -c "'$build/ftmpi' --version | grep '^backends';
    ldd '$build/ftmpi' | grep -E 'cudnn|cublas|nccl|cudart|not found';
    grep -h 'define CUDNN_M' /usr/include/cudnn_version*.h /usr/local/cuda/include/cudnn_version*.h 2>/dev/null"
step attention_tc 90 "$build/test/cuda/test_attention_tc"
step attention_cudnn 45 env FTMPI_CUDNN_VERBOSE=1 "$build/test/cuda/test_attention_cudnn"
step gpu_tests 180 sh -c 'for t in "$0"/test/cuda/test_*; do
        case $t in *.o|*.sh|*.log|*.trs) continue;; esac
        [ -x "$t" ] || continue
        out=$(timeout 25 "$t" 2>&1); rc=$?
        echo "$(basename "$t"): exit $rc $(echo "$out" | tail -n 1)"
    done
    for s in test_cuda_train test_cuda_resume test_cuda_overlap test_cuda_generate test_cuda_plan; do
        FT_BUILDDIR=$0 FT_SRCDIR=$1 timeout 60 sh "$1/test/cuda/$s.sh" > "/tmp/$s.log" 2>&1
        echo "$s.sh: exit $? $(tail -n 1 "/tmp/$s.log")"
    done' "$build" "$top"
step gpu_step 200 env FTMPI_BUILD="$build" GPU_STEP_LOGS="$logs" sh "$top/bench/gpu_step.sh" --shape 1b
[ "$last" -ne 0 ] &&
    step gpu_step_own 150 env FTMPI_BUILD="$build" FTMPI_CUDNN_ATTENTION=off sh "$top/bench/gpu_step.sh" --shape 1b
step overlap_off 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 FTMPI_OPTIMIZER_OVERLAP=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b
step gpu_step_nockpt 150 env FTMPI_BUILD="$build" sh "$top/bench/gpu_step.sh" --shape 1b --no-checkpointing
step grads_zero_all 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 FTMPI_GRADS_ZERO_ALL=1 \
    sh "$top/bench/gpu_step.sh" --shape 1b
step head 60 env FTMPI_BUILD="$build" sh "$top/bench/head.sh" cuda
step profile 120 env FTMPI_BUILD="$build" sh "$top/bench/gpu_profile.sh" 2
step timeline 90 env FTMPI_BUILD="$build" OUT="$logs" sh "$top/bench/gpu_timeline.sh" 16
step gpu_attention 300 env FTMPI_BUILD="$build" sh "$top/bench/gpu_attention.sh"
step cuda_ops 60 "$build/test/cuda/test_cuda_ops"
step racecheck 120 compute-sanitizer --tool racecheck --print-limit 5 "$build/test/cuda/test_attention_tc"
step ckpt_half 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b checkpoint_layers=8
step ckpt_keep_attention 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b checkpoint_keep_attention=true
step ckpt_keep_output 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b checkpoint_keep_attention_output=true
step lookup_ahead_off 60 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 FTMPI_LOOKUP_AHEAD=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b
step offload 90 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b offload_optimizer=true
step offload_serial 90 env FTMPI_BUILD="$build" GPU_STEP_PEER=0 FTMPI_OFFLOAD_OVERLAP=0 \
    sh "$top/bench/gpu_step.sh" --shape 1b offload_optimizer=true
step attention_profile 150 env FTMPI_BUILD="$build" OUT="$logs/attention-profile" \
    sh "$top/bench/gpu_attention_profile.sh" 128
case " ${GPU_QUICK_STEPS:-} " in
*" attention_profile_shared "*)
    step attention_profile_shared 150 env FTMPI_BUILD="$build" FTMPI_TC_BWD_LAYOUT=shared \
        OUT="$logs/attention-profile-shared" sh "$top/bench/gpu_attention_profile.sh" 128 ;;
esac
case " ${GPU_QUICK_STEPS:-} " in
*" attention_profile_wgmma "*)
    step attention_profile_wgmma 150 env FTMPI_BUILD="$build" FTMPI_TC_FWD_WGMMA=1 \
        FTMPI_TC_BWD_WGMMA=1 OUT="$logs/attention-profile-wgmma" \
        sh "$top/bench/gpu_attention_profile.sh" 128 ;;
esac
case " ${GPU_QUICK_STEPS:-} " in
*" first_run "*) step first_run 540 env FTMPI_BUILD_DIR="$build" sh "$top/scripts/gpu-first-run.sh" ;;
esac

[ -f "$logs/linkage.log" ] && { echo "== linkage"; cat "$logs/linkage.log"; }
for name in attention_tc attention_cudnn cuda_ops racecheck; do
    [ -f "$logs/$name.log" ] || continue
    echo "== $name"
    grep -E "FAIL|checks|refused|skipped|passed|ERROR SUMMARY|hazard|wgmma" "$logs/$name.log" | head -n 20
done
for name in gpu_tests gpu_step gpu_step_own overlap_off gpu_step_nockpt grads_zero_all ckpt_half ckpt_keep_attention ckpt_keep_output lookup_ahead_off offload offload_serial head gpu_attention attention_profile attention_profile_shared attention_profile_wgmma profile timeline first_run; do
    [ -f "$logs/$name.log" ] || continue
    echo "== $name"
    cat "$logs/$name.log"
done
