#!/bin/sh
# The first run on a machine with an NVIDIA GPU (none of this project's machines has one;
# the CUDA backend has so far run only on the CPU execution harness, doc/cuda-emulation.md).
#
#   scripts/gpu-first-run.sh [CONFIGURE ARGS...]     e.g. NVCC_ARCH="-arch=sm_90a"
#
# Builds natively in build-gpu/ ($FTMPI_BUILD_DIR), the CUDA test programs included, and
# runs, in order, stopping at the first failure:
#   1. test_cuda_ops on the device (every backend op against the CPU backend);
#   2. the same under compute-sanitizer: memcheck (with leak check), racecheck, synccheck,
#      initcheck;
#   3. the other CUDA test programs (bf16 ops, tensor-core attention, error paths) and the
#      device = "cuda" end-to-end tests (training vs the CPU backend on 1/2/4 ranks and
#      ZeRO 0-3 over NCCL, resume, ftmpi-generate, the planner; cases needing more ranks
#      than the machine has GPUs are skipped, each with its reason);
#   4. two training steps of input/tiny.cfg on device = "cuda" under memcheck, and a 2-rank
#      NCCL run of it when the machine has 2 GPUs.
# Dependencies: when the compilers, Open MPI, h5diff and the libraries (pkg-config) are
# already there, apt is not touched; else scripts/install-deps.sh installs them. A build
# directory that holds a finished build and no dependencies to rebuild it (the bundle of
# ../shared/gpu/make-bundle.sh, run through .gpu/run.sh) is used as it is.
# Each step prints one "gpu-first-run: <step>: ok|FAILED (log)" line; logs stay in
# build-gpu/first-run/. Send the logs with any failure: they are what the harness could
# not see (doc/cuda-emulation.md, "What it cannot prove").
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || { echo "gpu-first-run: no NVIDIA GPU visible (nvidia-smi)"; exit 77; }
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SAN="$CUDA_HOME/bin/compute-sanitizer"
[ -x "$SAN" ] || { echo "gpu-first-run: $SAN not found"; exit 1; }

cd "$top" || exit 1
bd=${FTMPI_BUILD_DIR:-build-gpu}
# build_deps: true when everything configure and make need is installed (however it got
# there); run_deps: what the steps below need of a finished build
run_deps() { command -v mpirun >/dev/null 2>&1 && command -v h5diff >/dev/null 2>&1; }
build_deps() {
    run_deps && command -v cc >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 &&
        command -v make >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 || return 1
    [ -x configure ] || command -v autoreconf >/dev/null 2>&1 || return 1
    { pkg-config --exists hdf5-openmpi || pkg-config --exists hdf5-mpi; } &&
        pkg-config --exists libconfig jansson libpcre2-8 openblas
}
prebuilt() { # a finished build of every program the steps run
    for f in ftmpi ftmpi-gendata ftmpi-generate test/cuda/test_cuda_ops test/cuda/test_cuda_ops_bf16 \
             test/cuda/test_attention_tc test/cuda/test_cuda_errors test/cuda/test_comm_nccl \
             test/cuda/cuda_device_count; do
        [ -x "$bd/$f" ] || return 1
    done
}
if build_deps; then
    build=yes
elif prebuilt && run_deps; then
    build=no
    echo "gpu-first-run: no compiler toolchain here: running the finished build in $bd as it is"
else
    scripts/install-deps.sh || { echo "gpu-first-run: dependencies missing and not installable"; exit 1; }
    build=yes
fi
mkdir -p "$bd/first-run"
cd "$bd" || exit 1
if [ $build = yes ]; then
    [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null) || exit 1
    [ -f Makefile ] || "$top/configure" -q --with-cuda="$CUDA_HOME" "$@" || exit 1
    make -j"$(nproc)" >/dev/null || { echo "gpu-first-run: build: FAILED"; exit 1; }
    # the test programs only (check_DATA=: none of these steps reads the real tokenizers that
    # make check unpacks with xz, which a GPU machine may lack)
    make -j"$(nproc)" check TESTS= check_DATA= >/dev/null || { echo "gpu-first-run: test programs' build: FAILED"; exit 1; }
fi
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
for t in test_cuda_ops_bf16 test_attention_tc test_cuda_errors; do
    step "$t" ./test/cuda/$t
done
for t in test_comm_nccl test_cuda_train test_cuda_resume test_cuda_generate test_cuda_plan; do
    step "$t" sh "$top/test/cuda/$t.sh"
    grep "^skipped: " "first-run/$t.log"
done

# Two steps of the demo model on the device, under memcheck, then over NCCL (the config's
# 5 warm-up steps would outnumber 2 steps, which ftmpi refuses: 1 here).
./ftmpi-gendata --rows 256 --seq-len 128 first-run/train.h5 >/dev/null
./ftmpi-gendata --rows 64 --seq-len 128 --seed 2 first-run/eval.h5 >/dev/null
cfg="$top/input/tiny.cfg data.train=first-run/train.h5 data.eval=first-run/eval.h5 device=cuda max_steps=2 optimizer.warmup_steps=1"
step "training under memcheck" "$SAN" --tool memcheck --error-exitcode 1 ./ftmpi $cfg
if [ "$(./test/cuda/cuda_device_count)" -ge 2 ]; then
    step "2-rank NCCL training" mpirun -np 2 ./ftmpi $cfg zero_stage=3
else
    echo "gpu-first-run: 2-rank NCCL training: skipped (one GPU)"
fi
echo "gpu-first-run: all steps passed"
