#!/bin/sh
# The gradient reduction beside the backward (src/shard/engine_reduce.c: at zero_stage 0
# and 1 on several ranks each unit's all-reduce, or reduce-scatter at stage 1, starts at
# its last grad_done of the accumulation window): training with it gives bitwise the
# losses, gradient norms and final weights of training without it (FTMPI_REDUCE_OVERLAP=0,
# every reduction after the backward), on 2 and 3 ranks (3: every unit padded), stages 0
# and 1, one micro-batch a step and several (a reduction started at an earlier
# micro-batch's grad_done would sum a partial gradient), the fp32 and bf16 recipes, fp32 and bf16 reduction (two staging
# buffers taking the units in turn), on the CPU backend (MPI) and, in a
# build with the CUDA backend, on CUDA with NCCL (on the CPU execution harness under its
# happens-before checker: a backward kernel writing a gradient NCCL still reads is a race);
# and stage 1's reduce-scatter gives stage 0's weights.
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg

# compare N TAG EXTRA...: 4 steps, no evaluations or checkpoints
compare() {
    n=$1 tag=$2; shift 2
    same_with_and_without FTMPI_REDUCE_OVERLAP "$n" "$tag" 4 0 "" s.cfg max_steps=4 \
        optimizer.warmup_steps=1 "$@"
    beside_or_not "$tag" "the gradient reductions"
}
# global 12, micro 2: accumulation 3 on 2 ranks, 2 on 3; global 4 on 2 ranks: 1
compare 2 cpu-s0-acc3 zero_stage=0 global_batch_size=12 micro_batch_size=2
compare 2 cpu-s0-acc1 zero_stage=0 global_batch_size=4 micro_batch_size=2
compare 3 cpu-s1-acc2 zero_stage=1 global_batch_size=12 micro_batch_size=2
compare 2 cpu-s1-bf16 zero_stage=1 global_batch_size=12 micro_batch_size=2 precision=bf16
# bf16 reduction: two staging buffers in turn for the model's 4 units (each reused)
compare 3 cpu-s0-rbf16 zero_stage=0 global_batch_size=12 micro_batch_size=2 grad_reduce_dtype=bf16
compare 2 cpu-s1-rbf16 zero_stage=1 global_batch_size=12 micro_batch_size=2 grad_reduce_dtype=bf16 precision=bf16

# Stage 1 reduce-scatters in place where stage 0 all-reduces: on 2 ranks each reduced
# element is one rounding of the same two addends either way, so with clipping off (the
# norm's summation order differs by stage) the weights must be bitwise stage 0's; a slice
# landing in the wrong place, or a rank updating from partial sums, would show here.
stage_pair() { # TAG EXTRA...
    tag=$1; shift
    for st in 0 1; do
        run_ranks 2 s.cfg max_steps=4 optimizer.warmup_steps=1 grad_clip=0 global_batch_size=12 \
            micro_batch_size=2 zero_stage=$st "$@" final_weights="$tag.s$st.h5" > "$tag.s$st.log" 2>&1 ||
            { cat "$tag.s$st.log"; fail "$tag: stage $st run"; }
    done
    h5diff "$tag.s0.h5" "$tag.s1.h5" /model /model > d.log 2>&1 ||
        { head d.log; fail "$tag: stage 1's weights differ from stage 0's"; }
    echo "$tag: stage 1 (reduce-scatter) bitwise stage 0 (all-reduce)"
}
stage_pair cpu-fp32
stage_pair cpu-bf16-reduce grad_reduce_dtype=bf16

if cuda_cases; then
    . "$S/test/cuda/devices.sh"
    if enough_devices 2 "CUDA, 2 ranks"; then
        compare 2 cuda-s0-bf16 device=cuda zero_stage=0 global_batch_size=12 micro_batch_size=2 precision=bf16
        compare 2 cuda-s1-fp32 device=cuda zero_stage=1 global_batch_size=8 micro_batch_size=2 precision=fp32
        stage_pair cuda-bf16 device=cuda precision=bf16
        compare 2 cuda-s0-rbf16 device=cuda zero_stage=0 global_batch_size=12 micro_batch_size=2 \
            precision=bf16 grad_reduce_dtype=bf16
    fi
fi
echo "PASS"
