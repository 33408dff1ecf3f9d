#!/bin/sh
# With offload_optimizer in the bf16 recipe, the host rounds the updated master to the
# working bits and the step uploads those (2 bytes a parameter) where the device would
# have rounded an uploaded fp32 master (4). Both sides round to nearest even and run the
# same AdamW arithmetic, so a run with offload must give bitwise the losses, gradient
# norms and final weights of the run without it: ZeRO stages 0-3, 1 and 3 ranks (3: the
# last rank's slice of every unit is padded, so its update range is shorter than the
# bits uploaded), the tied and untied heads, on the CPU and on the CUDA backend where
# the build has one that finds a device (a GPU or the CPU execution harness). In the fp32
# recipe the master values go up instead, straight to where the parameters take them. On
# CUDA the step's copies are queued, a unit's gradient coming down while the host updates
# the unit before (src/shard/engine_offload.c); the harness runs copies from and into
# page-locked memory when the stream reaches them, so a missing wait gives other numbers.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="max_steps=3 global_batch_size=12 micro_batch_size=2 optimizer.warmup_steps=1"

# check TAG RANKS ARGS...: the offloaded run against the one without offload
check() {
    tag=$1 n=$2; shift 2
    rm -f a.h5 b.h5 a.jsonl b.jsonl
    run_ranks "$n" s.cfg $common "$@" final_weights=a.h5 metrics_file=a.jsonl > a.log 2>&1 ||
        { cat a.log; fail "$tag: run without offload"; }
    run_ranks "$n" s.cfg $common "$@" offload_optimizer=true final_weights=b.h5 \
        metrics_file=b.jsonl > b.log 2>&1 || { cat b.log; fail "$tag: run with offload"; }
    grep -q "optimizer offloaded" b.log || { cat b.log; fail "$tag: the run did not offload"; }
    # on CUDA the turn buffers are page-locked, so that the copies overlap the host's
    # update (engine_offload.c); the CPU has no such memory
    pinned=$(grep -c "optimizer offloaded.*page-locked for the transfers" b.log)
    case "$tag" in
    cuda*) [ "$pinned" -ge 1 ] || { grep offloaded b.log; fail "$tag: no page-locked buffers"; } ;;
    *) [ "$pinned" -eq 0 ] || { grep offloaded b.log; fail "$tag: page-locked buffers on the CPU"; } ;;
    esac
    same_bits "$tag" 3 a b
    echo "$tag: ok"
}

ranks="1"
have_mpirun && ranks="1 3"
for dev in $(backends_for s.cfg); do
    for p in bf16 fp32; do
        for n in $ranks; do
            for stage in 0 1 2 3; do
                [ "$n" -eq 1 ] && [ "$stage" -gt 0 ] && continue # one rank: the stages are alike
                check "$dev, $p, $n ranks, stage $stage" $n device=$dev precision=$p zero_stage=$stage
            done
        done
    done
    check "$dev, bf16, 1 rank, tied head" 1 device=$dev precision=bf16 model.tie_word_embeddings=true
    [ "$ranks" != 1 ] && check "$dev, bf16, 3 ranks, stage 2, tied head" 3 device=$dev precision=bf16 \
        zero_stage=2 model.tie_word_embeddings=true
    # a resume publishes the checkpoint's master outside a step (one buffer, each upload
    # done before the next unit's rounding): the offloaded run resumed at step 2 ends
    # with the uninterrupted one's weights
    n=${ranks##* } tag="$dev, bf16, $n ranks, stage 3, resumed"
    rm -rf ck a.h5 r.h5
    run_ranks "$n" s.cfg $common device=$dev precision=bf16 zero_stage=3 offload_optimizer=true \
        save_every=2 checkpoint_dir=ck final_weights=a.h5 > a.log 2>&1 || { cat a.log; fail "$tag: run"; }
    run_ranks "$n" s.cfg $common device=$dev precision=bf16 zero_stage=3 offload_optimizer=true \
        resume=ck/step-000002.h5 final_weights=r.h5 > r.log 2>&1 || { cat r.log; fail "$tag: resume"; }
    h5diff a.h5 r.h5 /model /model > d.log 2>&1 || { head -20 d.log; fail "$tag: final weights differ"; }
    echo "$tag: ok"
done
exit 0
