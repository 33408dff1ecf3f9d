#!/bin/sh
# NCCL on MPI in the CUDA harness: test_emu_nccl on 1, 2, 3 and 4 ranks.
# Run from the build directory (as `make check` does); ranks oversubscribe the cores.
set -e
bin=${EMU_NCCL_BIN:-./test/cudaemu/test_emu_nccl}
run=${RUN_MPI:-./test/run_mpi.sh}
export OMPI_MCA_mpi_warn_on_fork=0 # the finding tests fork children that make no MPI call
for n in 1 2 3 4; do
    echo "test_emu_nccl on $n rank(s)"
    timeout 300 "$run" "$n" "$bin"
done
