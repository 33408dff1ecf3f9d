#!/bin/sh
# One command: install dependencies, build, run the whole test suite (make check).
# Ends with one line "N passed, N failed, N skipped". Extra arguments go to configure.
#
# Where the CUDA headers are installed (/usr/local/cuda), the suite runs on the CPU
# execution harness build (build-emu/, --with-cuda-emulation): the same product code plus
# every line of cuda/ run on the CPU against the CPU backend (doc/cuda-emulation.md).
# Where nvcc is installed, the GPU build (build/) is compiled too, to prove that nvcc
# builds the same kernels. Without CUDA the suite runs on the CPU-only build in build/.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/install-deps.sh
dir=build
if [ $# -eq 0 ] && [ -f /usr/local/cuda/include/cuda_runtime_api.h ] && [ -f /usr/local/cuda/include/nccl.h ]; then
    [ -x /usr/local/cuda/bin/nvcc ] && scripts/build.sh
    FTMPI_BUILD_DIR=build-emu scripts/build.sh --with-cuda-emulation
    dir=build-emu
else
    scripts/build.sh "$@"
fi
cd "$dir"
rc=0
make -j2 check >/dev/null 2>&1 || rc=$?
sh "$top/.ci/summarize.sh" test-suite.log
exit $rc
