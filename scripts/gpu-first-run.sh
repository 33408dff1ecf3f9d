#!/bin/sh
# The first run on a machine with an NVIDIA GPU (none of this project's machines has one;
# the CUDA backend has so far run only on the CPU execution harness, doc/cuda-emulation.md).
#
#   scripts/gpu-first-run.sh [CONFIGURE ARGS...]     e.g. NVCC_ARCH="-arch=sm_90"
#
# Builds natively in build-gpu/ and runs, in order, stopping at the first failure:
#   1. test_cuda_ops on the device (every backend op against the CPU backend);
#   2. the same under compute-sanitizer: memcheck (with leak check), racecheck, synccheck,
#      initcheck;
#   3. the device = "cuda" end-to-end tests (training vs the CPU backend on 1/2/4 ranks
#      and ZeRO 0-3 over NCCL, resume, ftmpi-generate, the planner);
#   4. two training steps of input/tiny.cfg on device = "cuda" under memcheck, and a 2-rank
#      NCCL run of it when the machine has 2 GPUs.
# Each step prints one "gpu-first-run: <step>: ok|FAILED (log)" line; logs stay in
# build-gpu/first-run/. Send the logs with any failure: they are what the harness could
# not see (doc/cuda-emulation.md, "What it cannot prove").
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || { echo "gpu-first-run: no NVIDIA GPU visible (nvidia-smi)"; exit 77; }
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SAN="$CUDA_HOME/bin/compute-sanitizer"
[ -x "$SAN" ] || { echo "gpu-first-run: $SAN not found"; exit 1; }

cd "$top"
scripts/install-deps.sh
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p build-gpu/first-run
cd build-gpu
[ -f Makefile ] || ../configure -q --with-cuda="$CUDA_HOME" "$@" || exit 1
make -j"$(nproc)" >/dev/null || { echo "gpu-first-run: build: FAILED"; exit 1; }
make -j"$(nproc)" test/cuda/test_cuda_ops >/dev/null || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 FT_BUILDDIR="$PWD" FT_SRCDIR="$top"

step() { # NAME COMMAND...
    name=$1; shift
    log="first-run/$(echo "$name" | tr ' /' '__').log"
    if "$@" > "$log" 2>&1; then echo "gpu-first-run: $name: ok"
    else echo "gpu-first-run: $name: FAILED ($PWD/$log)"; tail -n 20 "$log"; exit 1; fi
}

step "test_cuda_ops" ./test/cuda/test_cuda_ops
step "memcheck" "$SAN" --tool memcheck --leak-check full --error-exitcode 1 ./test/cuda/test_cuda_ops
step "racecheck" "$SAN" --tool racecheck --racecheck-report all --error-exitcode 1 ./test/cuda/test_cuda_ops
step "synccheck" "$SAN" --tool synccheck --error-exitcode 1 ./test/cuda/test_cuda_ops
step "initcheck" "$SAN" --tool initcheck --error-exitcode 1 ./test/cuda/test_cuda_ops
for t in test_cuda_train test_cuda_resume test_cuda_generate test_cuda_plan; do
    step "$t" sh "$top/test/cuda/$t.sh"
done

# Two steps of the demo model on the device, under memcheck, then over NCCL.
./ftmpi-gendata --rows 256 --seq-len 128 first-run/train.h5 >/dev/null
./ftmpi-gendata --rows 64 --seq-len 128 --seed 2 first-run/eval.h5 >/dev/null
cfg="$top/input/tiny.cfg data.train=first-run/train.h5 data.eval=first-run/eval.h5 device=cuda max_steps=2"
step "training under memcheck" "$SAN" --tool memcheck --error-exitcode 1 ./ftmpi $cfg
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    step "2-rank NCCL training" mpirun -np 2 ./ftmpi $cfg zero_stage=3
else
    echo "gpu-first-run: 2-rank NCCL training: skipped (one GPU)"
fi
echo "gpu-first-run: all steps passed"
