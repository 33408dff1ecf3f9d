#!/bin/sh
# test_comm_nccl (the NCCL communicator against the MPI one) on 1, 2 and 3 ranks.
. "$(dirname "$0")/../train/lib.sh"
for n in 1 2 3; do
    if [ "$n" -eq 1 ]; then "$B/test/cuda/test_comm_nccl" > out.log 2>&1; rc=$?
    else have_mpirun || skip "mpirun not found"; "$MPIRUN" --oversubscribe -np $n "$B/test/cuda/test_comm_nccl" > out.log 2>&1; rc=$?; fi
    [ $rc -eq 77 ] && skip "no CUDA device"
    [ $rc -eq 0 ] || { cat out.log; fail "test_comm_nccl on $n ranks"; }
    echo "$n ranks: $(tail -n 1 out.log)"
done
