#!/bin/sh
# One command: install dependencies, build, run the whole test suite (make check).
# Ends with one line "N passed, N failed, N skipped". Extra arguments go to configure.
#
# Where the CUDA headers are installed (/usr/local/cuda), the suite runs on the CPU
# execution harness build (build-emu/, --with-cuda-emulation): the same product code plus
# every line of cuda/ run on the CPU against the CPU backend (doc/cuda-emulation.md).
# Where nvcc is installed, the GPU build (build/) is compiled too, to prove that nvcc
# builds the same kernels, and its test programs are compiled (not run: they need a GPU),
# so that code only the GPU build sees cannot break `make check` there unnoticed; a
# failure there counts as one failed test. Without CUDA the suite runs on the CPU-only
# build in build/.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/install-deps.sh
dir=build
gpu_programs=0   # 1: the nvcc build's test programs did not compile
if [ $# -eq 0 ] && [ -f /usr/local/cuda/include/cuda_runtime_api.h ] && [ -f /usr/local/cuda/include/nccl.h ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then
        scripts/build.sh
        make -C build -j2 check TESTS= > build/check-programs.log 2>&1 ||
            { grep -E -A2 'error:|\*\*\*' build/check-programs.log | head -n 40
              echo "test.sh: the nvcc build's test programs do not compile (build/check-programs.log)"
              gpu_programs=1; }
    fi
    FTMPI_BUILD_DIR=build-emu scripts/build.sh --with-cuda-emulation
    dir=build-emu
else
    scripts/build.sh "$@"
fi
cd "$dir"
rc=0
make -j2 check >/dev/null 2>&1 || rc=$?
if [ $gpu_programs -eq 0 ]; then
    sh "$top/.ci/summarize.sh" test-suite.log
else
    # the totals line (the last) counts the GPU build's test programs as one failure
    sh "$top/.ci/summarize.sh" test-suite.log | awk '{ if (NR > 1) print last; last = $0 }
        END { $0 = last; $3 = $3 + 1; print }'
    rc=1
fi
exit $rc
