#!/bin/sh
# A gradient reset leaves the 2-D weights' part unset, and the first weight-gradient
# GEMM of each writes it (beta 0) instead of adding to zeros (src/shard/engine_unset.c).
# With that part poisoned with NaN (FTMPI_GRADS_POISON_UNSET=1), any element read before
# it is written, or never written, turns the run NaN; so every run must give bitwise the
# losses, gradient norms and final weights of the run that zeroes everything
# (FTMPI_GRADS_ZERO_ALL=1): ZeRO stages 0-3, 1 and 2 ranks, gradient accumulation, tied
# and untied heads, the bf16 recipe, offload, and LoRA (whose adapters take zeroed
# accumulators through grads()); on the CPU, and on the CUDA backend where the build has
# one that finds a device (a GPU or the CPU execution harness).
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
# accumulation: 2 micro-batches a step on 2 ranks, 4 on 1
common="max_steps=3 global_batch_size=8 micro_batch_size=2 optimizer.warmup_steps=1"

# where run X leaves its weights: final_weights, or (LoRA: the adapters) a checkpoint
lora=""
weights() { if [ -n "$lora" ]; then echo "checkpoint_dir=ck$1"; else echo "final_weights=$1.h5"; fi; }

# check TAG RANKS ARGS...: the poisoned run against the zeroing one
check() {
    tag=$1 n=$2; shift 2
    rm -rf a.h5 b.h5 a.jsonl b.jsonl cka ckb
    FTMPI_GRADS_ZERO_ALL=1 run_ranks "$n" s.cfg $common "$@" $(weights a) \
        metrics_file=a.jsonl > a.log 2>&1 || { cat a.log; fail "$tag: zeroing run"; }
    FTMPI_GRADS_POISON_UNSET=1 run_ranks "$n" s.cfg $common "$@" $(weights b) \
        metrics_file=b.jsonl > b.log 2>&1 || { cat b.log; fail "$tag: poisoned run"; }
    [ -n "$lora" ] && { cp cka/step-000003.h5 a.h5 && cp ckb/step-000003.h5 b.h5 || fail "$tag: checkpoints"; }
    same_bits "$tag" 3 a b
    echo "$tag: ok"
}

ranks="1"
have_mpirun && ranks="1 2"
for dev in $(backends_for s.cfg); do
    for n in $ranks; do
        for stage in 0 1 2 3; do
            check "$dev, $n ranks, stage $stage" $n device=$dev zero_stage=$stage
        done
        check "$dev, $n ranks, tied head" $n device=$dev model.tie_word_embeddings=true
        check "$dev, $n ranks, bf16, stage 0" $n device=$dev precision=bf16
        check "$dev, $n ranks, bf16, stage 2, tied" $n device=$dev precision=bf16 zero_stage=2 \
            model.tie_word_embeddings=true
    done
    check "$dev, offload" 1 device=$dev offload_optimizer=true zero_stage=1
done

# LoRA: the adapters' engine hands out grads() accumulators, zeroed from the unset part
cat >> s.cfg <<CFG
lora = { rank = 4; alpha = 8.0; };
CFG
lora=1
for n in $ranks; do
    check "LoRA, $n ranks, stage 0" $n zero_stage=0
    check "LoRA, $n ranks, stage 3" $n zero_stage=3
done
exit 0
