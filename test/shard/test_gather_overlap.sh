#!/bin/sh
# The all-gathers of updated parameters beside the next forward (src/shard/engine_overlap.c:
# at zero_stage 1 and 2 in the bf16 recipe the update writes each unit's bf16 working
# values into its own slice of the unit and the all-gather starts in place without a wait;
# the next forward's acquire waits for exactly its unit): training with it gives bitwise
# the losses, gradient norms, evaluation losses, checkpoints (weights, master, moments)
# and final weights of training without it (FTMPI_GATHER_OVERLAP=0: a wait after every
# unit's gather, through a shared staging buffer), on 2 and 3 ranks (3: every unit padded,
# the last rank's slice ending in padding), with evaluation and checkpoints between steps
# (entry points that must wait for every gather first), on the CPU backend (MPI) and, in a
# build with the CUDA backend, on CUDA with NCCL (on the CPU execution harness under its
# happens-before checker, where a forward reading a unit whose gather is still landing is
# a race, and the overlapped step takes fewer host waits).
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 12 --seq-len 32 --digits 2 --seed 9 valid.h5 >/dev/null || fail "gendata (eval)"
write_small_cfg s.cfg
common="precision=bf16 max_steps=4 optimizer.warmup_steps=1 global_batch_size=12 micro_batch_size=2 eval_every=2 data.eval=valid.h5 save_every=2"

# compare N TAG EXTRA...: 4 steps, evaluations and checkpoints after steps 2 and 4
compare() {
    n=$1 tag=$2; shift 2
    same_with_and_without FTMPI_GATHER_OVERLAP "$n" "$tag" 4 2 "step-000002.h5 step-000004.h5" \
        s.cfg $common "$@"
    beside_or_not "$tag" "the parameter all-gathers"
}
compare 2 cpu-s1 zero_stage=1
compare 3 cpu-s2 zero_stage=2

if cuda_cases; then
    . "$S/test/cuda/devices.sh"
    if enough_devices 2 "CUDA, 2 ranks"; then
        compare 2 cuda-s2 device=cuda zero_stage=2
        compare 2 cuda-s1 device=cuda zero_stage=1 grad_reduce_dtype=bf16
        if "$FTMPI" --version | grep -q "CPU execution harness"; then
            # the host's waits for the device over steps 3-4 (both ranks' counts summed:
            # their lines come in either order): none per unit's gather with the overlap
            waits() { # OVERLAP STEPS
                FTMPI_GATHER_OVERLAP=$1 CUDAEMU_REPORT=ops run_ranks 2 s.cfg device=cuda \
                    precision=bf16 zero_stage=2 global_batch_size=4 optimizer.warmup_steps=0 \
                    max_steps=$2 > w.log 2>&1 || { cat w.log; fail "waits run"; }
                sed -n 's/^cudaemu: host waits for the device: \([0-9]*\);.*/\1/p' w.log |
                    awk '{ n += $1 } END { print n + 0 }'
            }
            on=$(( $(waits 1 4) - $(waits 1 2) )); off=$(( $(waits 0 4) - $(waits 0 2) ))
            echo "host waits over steps 3-4: $on with the overlap, $off without"
            [ "$on" -lt "$off" ] || fail "expected fewer host waits with the overlap ($on vs $off)"
        fi
    fi
fi
echo "PASS"
