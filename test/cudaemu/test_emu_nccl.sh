#!/bin/sh
# NCCL on MPI in the CUDA harness: test_emu_nccl on 1, 2, 3 and 4 ranks (oversubscribed).
# Run from the build directory, as `make check` does. SKIP (77) without mpirun.
set -e
bin=${EMU_NCCL_BIN:-./test/cudaemu/test_emu_nccl}
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null 2>&1 || { echo "no $mpirun: SKIP"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_mpi_warn_on_fork=0 # the finding tests fork children that make no MPI call
for n in 1 2 3 4; do
    echo "test_emu_nccl on $n rank(s)"
    timeout 300 "$mpirun" --oversubscribe -np "$n" "$bin"
done
