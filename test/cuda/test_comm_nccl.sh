#!/bin/sh
# test_comm_nccl (the NCCL communicator against the MPI one) on 1, 2 and 3 ranks; a rank
# count above the machine's devices is skipped with the reason (test/cuda/devices.sh).
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/devices.sh"
for n in 1 2 3; do
    [ "$n" -eq 1 ] || enough_devices $n "test_comm_nccl on $n ranks" || continue
    if [ "$n" -eq 1 ]; then "$B/test/cuda/test_comm_nccl" > out.log 2>&1; rc=$?
    else have_mpirun || skip "mpirun not found"; "$MPIRUN" --oversubscribe -np $n "$B/test/cuda/test_comm_nccl" > out.log 2>&1; rc=$?; fi
    [ $rc -eq 77 ] && skip "no CUDA device"
    [ $rc -eq 0 ] || { cat out.log; fail "test_comm_nccl on $n ranks"; }
    echo "$n ranks: $(tail -n 1 out.log)"
done
