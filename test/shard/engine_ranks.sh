# shellcheck shell=sh
# Sourced by the engine tests' wrappers (after test/train/lib.sh). run_engine_test NAME:
# test/shard/NAME on 1, 2 and 3 ranks (3: every unit needs padding), on the CPU backend
# and, in a build with the CUDA backend (a GPU or the CPU execution harness), on CUDA with
# NCCL; a CUDA rank count above the machine's devices is skipped with the reason
# (test/cuda/devices.sh), as is a program that answers 77.
run_engine_test() {
    have_mpirun || skip "mpirun not found"
    backends=cpu
    if cuda_cases; then
        . "$S/test/cuda/devices.sh"
        backends="cpu cuda"
    fi
    for be in $backends; do
        for n in 1 2 3; do
            [ "$be" = cpu ] || enough_devices $n "$1, cuda, $n ranks" || continue
            if [ "$n" -eq 1 ]; then "$B/test/shard/$1" $be > out.log 2>&1; rc=$?
            else "$MPIRUN" --oversubscribe -np $n "$B/test/shard/$1" $be > out.log 2>&1; rc=$?; fi
            if [ $rc -eq 77 ]; then echo "skipped: $be: $(tail -n 1 out.log)"; continue; fi
            [ $rc -eq 0 ] || { cat out.log; fail "$1, $be, $n ranks"; }
            echo "$be, $n ranks: $(tail -n 1 out.log)"
        done
    done
}
