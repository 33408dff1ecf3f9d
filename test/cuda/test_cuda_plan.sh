#!/bin/sh
# The planner (ftmpi --plan) against device = "cuda" runs: the backend's measured peak of
# alloc()'d bytes, and on the CPU execution harness also the emulated device allocator's
# peak of every device byte (the backend's scratch and cuBLASLt workspace included),
# which the plan does not count and must therefore undercut by no more than those
# (reported, checked to be under 64 MiB + 10 %).
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 64 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
sed -i 's/max_position_embeddings = 64/max_position_embeddings = 128/' small.cfg
require_cuda_device small.cfg
check() { # N ARGS...
    n=$1; shift
    "$FTMPI" --plan -np "$n" small.cfg device=cuda max_steps=2 "$@" > plan.log 2>&1 || { cat plan.log; fail "plan $*"; }
    want=$(sed -n 's/.*(this config: device total \([0-9]*\) bytes).*/\1/p' plan.log)
    rm -f m.jsonl
    CUDAEMU_REPORT=1 run_ranks "$n" small.cfg device=cuda max_steps=2 metrics_file=m.jsonl "$@" > run.log 2>&1 || { cat run.log; fail "run $*"; }
    got=$(metric m.jsonl peak_memory backend_bytes)
    awk -v w="$want" -v g="$got" 'BEGIN { printf "planned %d, measured %d\n", w, g; exit !(w == g) }' ||
        fail "$n ranks $*: the plan is not the backend's measured peak"
    dev=$(sed -n 's/^cudaemu: device memory: peak \([0-9]*\) bytes.*/\1/p' run.log | sort -n | tail -n 1)
    if [ -n "$dev" ]; then
        awk -v w="$want" -v d="$dev" 'BEGIN { printf "emulated device peak %d (%.3f of plan)\n", d, d / w; exit !(d >= w * 0.9 && d <= w * 1.1 + 67108864) }' ||
            fail "$n ranks $*: the emulated allocator's peak is not the plan plus the backend's fixed buffers"
    fi
}
check 1 zero_stage=0 activation_checkpointing=false
check 1 zero_stage=0 activation_checkpointing=true micro_batch_size=4
if have_mpirun && enough_devices 2 "the 2-rank plans"; then
    check 2 zero_stage=1 activation_checkpointing=true
    # stage 0's loads complete each unit in place; the next lookup's embedding rows
    check 2 zero_stage=0 precision=bf16 activation_checkpointing=true micro_batch_size=2
    check 2 zero_stage=3 activation_checkpointing=false
    check 2 zero_stage=3 offload_optimizer=true
    # the bf16 recipe (a scaled-down shape of the 70B plan: stage 3, checkpointing)
    check 2 zero_stage=3 precision=bf16 activation_checkpointing=true
    check 2 zero_stage=3 precision=bf16 grad_reduce_dtype=bf16 activation_checkpointing=true
    # LoRA: the frozen base's shard and gathers, the adapters' engine, u and du buffers
    check 2 zero_stage=3 precision=bf16 activation_checkpointing=true lora.rank=4
fi
check 1 zero_stage=0 activation_checkpointing=false lora.rank=4
check 1 zero_stage=0 precision=bf16 activation_checkpointing=false
check 1 zero_stage=0 precision=bf16 activation_checkpointing=true micro_batch_size=4
echo "planner equals the device = cuda backend peaks"
