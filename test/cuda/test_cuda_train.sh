#!/bin/sh
# device = "cuda" trains like device = "cpu": for 1, 2 and 4 ranks at ZeRO stages 0-3,
# with accumulation, optimizer offload and bf16 gradient reduction over NCCL, the per-step
# losses agree with the CPU backend's 1-rank run to relative 1e-5 and the final weights to
# absolute 2e-4. The CUDA kernels sum in other orders than the CPU's (block reductions,
# flash-attention tiles), so agreement is to fp32 round-off, amplified by Adam where
# |g| ~ eps (the CPU-only N-rank test holds 2e-5 / 1e-4 for the same reason): on
# 2026-11-28 the ASan build's 1-rank stage-3 case found one weight of ~100k 1.01e-4 off,
# the code of the day before too, on a machine where earlier runs had stayed under 1e-4.
# bf16 reduction rounds every partial sum to 8 bits of mantissa: it is compared with the
# CPU backend doing the same bf16 reduction over MPI, to the same tolerances.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
require_cuda_device small.cfg
common="max_steps=3 global_batch_size=8 micro_batch_size=2 optimizer.warmup_steps=1"
compare() { # TAG REF_LOG REF_WEIGHTS RUN_LOG RUN_WEIGHTS
    losses "$2" > lref; losses "$4" > lrun
    [ "$(wc -l < lrun)" -eq 3 ] || { cat "$4"; fail "$1: expected 3 steps"; }
    same_losses lrun lref 1e-5 || fail "$1: losses differ from the CPU backend"
    h5diff -d 2e-4 "$3" "$5" /model /model > diff.log 2>&1 ||
        { head -20 diff.log; fail "$1: final weights differ from the CPU backend"; }
    echo "$1: ok"
}
run_ranks 1 small.cfg $common device=cpu final_weights=cpu.h5 > cpu.log 2>&1 || { cat cpu.log; fail "cpu run"; }
# FT_CUDA_TRAIN_CASES="RANKS:STAGE ..." runs only those cases (test/cudaemu/defects.py)
cases=${FT_CUDA_TRAIN_CASES:-"1:0 1:1 1:2 1:3 2:0 2:1 2:2 2:3 4:0 4:1 4:2 4:3"}
for c in $cases; do
    n=${c%%:*} stage=${c##*:}
    [ "$n" -gt 1 ] && ! have_mpirun && skip "mpirun not found"
    enough_devices "$n" "cuda, $n ranks, stage $stage" || continue
    run_ranks $n small.cfg $common device=cuda zero_stage=$stage final_weights=gpu.h5 > gpu.log 2>&1 ||
        { cat gpu.log; fail "cuda, $n ranks, stage $stage"; }
    [ "$n" -gt 1 ] && { grep -q "collectives nccl" gpu.log || { cat gpu.log; fail "$n ranks did not use NCCL"; }; }
    compare "cuda, $n ranks, stage $stage" cpu.log cpu.h5 gpu.log gpu.h5
done
[ -n "${FT_CUDA_TRAIN_CASES:-}" ] && exit 0
# The recompute of a block that kept its attention half (checkpoint_keep_attention) skips
# q, k, v, attention and the output projection on the device too: the same bits as the
# full recompute
run_ranks 1 small.cfg $common device=cuda final_weights=full.h5 > full.log 2>&1 ||
    { cat full.log; fail "cuda, full recompute"; }
run_ranks 1 small.cfg $common device=cuda checkpoint_keep_attention=true final_weights=kept.h5 \
    > kept.log 2>&1 || { cat kept.log; fail "cuda, attention kept"; }
[ "$(losses full.log)" = "$(losses kept.log)" ] && h5diff full.h5 kept.h5 /model /model > diff.log 2>&1 ||
    { head -20 diff.log; fail "cuda: keeping attention through the recompute changed the result"; }
echo "cuda, checkpoint_keep_attention: bitwise the full recompute"
# ... and one that kept attention's output and log-sum-exp skips attention itself
run_ranks 1 small.cfg $common device=cuda checkpoint_keep_attention_output=true \
    final_weights=kept_output.h5 > kept_output.log 2>&1 || { cat kept_output.log; fail "cuda, attention's output kept"; }
[ "$(losses full.log)" = "$(losses kept_output.log)" ] &&
    h5diff full.h5 kept_output.h5 /model /model > diff.log 2>&1 ||
    { head -20 diff.log; fail "cuda: keeping attention's output through the recompute changed the result"; }
echo "cuda, checkpoint_keep_attention_output: bitwise the full recompute"
# Initial values reach the device a piece of host memory at a time (FTMPI_FILL_PIECE,
# elements; the default, 16 MiB, is more than any unit here): pieces of 997 elements, a
# size that splits every tensor at odd places, must give the bits of whole slices, from
# the seed and from a weights file, at stage 0 (through the staging buffer) and 3 (into
# the master).
sed '/^model = {/,/^};/c model = { weights = "cpu.h5"; };' small.cfg > from_file.cfg
for stage in 0 3; do
    for cfg in small.cfg from_file.cfg; do
        what="stage $stage, $cfg"
        run_ranks 1 $cfg $common device=cuda zero_stage=$stage final_weights=whole.h5 \
            > whole.log 2>&1 || { cat whole.log; fail "cuda, whole slices, $what"; }
        FTMPI_FILL_PIECE=997 run_ranks 1 $cfg $common device=cuda zero_stage=$stage \
            final_weights=pieces.h5 > pieces.log 2>&1 || { cat pieces.log; fail "cuda, pieces, $what"; }
        [ "$(losses whole.log)" = "$(losses pieces.log)" ] && h5diff whole.h5 pieces.h5 /model /model > diff.log 2>&1 ||
            { head -20 diff.log; fail "cuda, $what: 997-element pieces differ from whole slices"; }
        echo "cuda, initial values in 997-element pieces, $what: bitwise as whole slices"
    done
done
if enough_devices 2 "optimizer offload and bf16 gradient reduction on 2 ranks"; then
# optimizer state offloaded to the host (the CPU backend updates, the device publishes)
run_ranks 2 small.cfg $common device=cuda zero_stage=3 offload_optimizer=true final_weights=gpu.h5 > gpu.log 2>&1 ||
    { cat gpu.log; fail "cuda offload"; }
compare "cuda, 2 ranks, stage 3, optimizer offload" cpu.log cpu.h5 gpu.log gpu.h5
# bf16 gradient reduction: NCCL's bf16 sum against MPI's on the CPU backend, at lr 2e-3
# like the families below: a gradient's fp32 round-off can flip the rounding of its bf16
# partial sum (2^-8 of it), and where |g| ~ eps Adam turns that into a weight step near
# lr (at 1e-2 one weight moved more than 1e-4 when the RMSNorm kernels changed their
# summation order; at 2e-3 the worst is under 1e-4 with the same orders).
red="grad_reduce_dtype=bf16 optimizer.lr=2e-3"
run_ranks 2 small.cfg $common device=cpu zero_stage=2 $red final_weights=cpu16.h5 > cpu16.log 2>&1 ||
    { cat cpu16.log; fail "cpu bf16 reduction"; }
run_ranks 2 small.cfg $common device=cuda zero_stage=2 $red final_weights=gpu16.h5 > gpu16.log 2>&1 ||
    { cat gpu16.log; fail "cuda bf16 reduction"; }
compare "cuda, 2 ranks, stage 2, bf16 gradient reduction" cpu16.log cpu16.h5 gpu16.log gpu16.h5
# stage 0 reduces with an all-reduce (bf16) instead of a reduce-scatter
run_ranks 2 small.cfg $common device=cpu zero_stage=0 grad_reduce_dtype=bf16 final_weights=cpu16.h5 > cpu16.log 2>&1 ||
    { cat cpu16.log; fail "cpu bf16 all-reduce"; }
run_ranks 2 small.cfg $common device=cuda zero_stage=0 grad_reduce_dtype=bf16 final_weights=gpu16.h5 > gpu16.log 2>&1 ||
    { cat gpu16.log; fail "cuda bf16 all-reduce"; }
compare "cuda, 2 ranks, stage 0, bf16 gradient all-reduce" cpu16.log cpu16.h5 gpu16.log gpu16.h5
fi
# The bf16 recipe (precision = "bf16"): the CUDA kernels in bf16 storage, cuBLASLt with
# bf16 operands and the tensor-core attention against the CPU backend's bf16 ops. Both
# round every op's output once, but the tensor-core attention also rounds the
# probabilities to bf16 for its P.V and dS GEMMs, so the runs agree to bf16 resolution,
# not fp32 round-off: losses to relative 3e-4 over 3 steps (1e-4 seen) at lr 2e-3. (At
# this config's lr 1e-2 the third step already amplifies bf16-level gradient differences
# to 1 %, between the CPU's fp32 and bf16 runs alike.) Weights are not compared: the
# masters then differ by Adam's steps where gradients near zero change sign.
for run in "1 zero_stage=0" "2 zero_stage=3" "2 zero_stage=2 grad_reduce_dtype=bf16"; do
    set -- $run
    n=$1; shift
    enough_devices "$n" "cuda bf16 recipe, $n ranks $*" || continue
    run_ranks $n small.cfg $common optimizer.lr=2e-3 device=cpu precision=bf16 "$@" > cpu16.log 2>&1 ||
        { cat cpu16.log; fail "cpu bf16 recipe, $n ranks $*"; }
    run_ranks $n small.cfg $common optimizer.lr=2e-3 device=cuda precision=bf16 "$@" > gpu16.log 2>&1 ||
        { cat gpu16.log; fail "cuda bf16 recipe, $n ranks $*"; }
    losses cpu16.log > lref; losses gpu16.log > lrun
    [ "$(wc -l < lrun)" -eq 3 ] || { cat gpu16.log; fail "bf16 recipe: expected 3 steps"; }
    same_losses lrun lref 3e-4 || fail "cuda bf16 recipe, $n ranks $*: losses differ from the CPU backend's"
    echo "cuda bf16 recipe, $n ranks $*: ok"
done
# The own kernels' one-pass attention backward (dQ summed with atomics,
# FTMPI_ATTENTION_NONDETERMINISTIC=1; cuDNN off so that the own kernels run) trains like
# the CPU backend, to the bf16 recipe's tolerance (the CPU run is the last loop's first).
run_ranks 1 small.cfg $common optimizer.lr=2e-3 device=cpu precision=bf16 > cpu16.log 2>&1 ||
    { cat cpu16.log; fail "cpu bf16 recipe, 1 rank"; }
env FTMPI_ATTENTION_NONDETERMINISTIC=1 FTMPI_CUDNN_ATTENTION=off \
    "$FTMPI" small.cfg $common optimizer.lr=2e-3 device=cuda precision=bf16 > gpu16.log 2>&1 ||
    { cat gpu16.log; fail "cuda bf16 recipe, one-pass attention backward"; }
losses cpu16.log > lref; losses gpu16.log > lrun
[ "$(wc -l < lrun)" -eq 3 ] || { cat gpu16.log; fail "one-pass backward: expected 3 steps"; }
same_losses lrun lref 3e-4 || fail "cuda bf16 recipe, one-pass attention backward: losses differ"
echo "cuda bf16 recipe, one-pass attention backward: ok"
# The other model families (the switches test_zero_families.sh uses): their CUDA kernels
# (biases, q/k norms, the sliding window, LayerNorm, GELU, partial and interleaved rotary,
# parallel residual, head bias) train like the CPU backend's, fp32 to the tolerances
# above and the bf16 recipe to its 3e-4, on 2 ranks at stage 3 over NCCL. At lr 2e-3: at
# 1e-2, Adam turns fp32 round-off in a gradient near zero into a weight step of up to
# 1.2e-4 (one element of Mistral's, where the window changes the attention's sum order).
# With one device they run on 1 rank at stage 3: the same kernels, without NCCL.
fr=2
enough_devices 2 "the families on 2 ranks (run on 1 rank instead)" || fr=1
for family in "model.family=qwen2 model.tie_word_embeddings=true" \
              "model.family=qwen3 model.head_dim=24" \
              "model.family=mistral model.sliding_window=5" \
              "model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true" \
              "model.family=gptj model.num_key_value_heads=4 model.rotary_dim=8 model.gelu_tanh=true"; do
    name=${family%% *}
    run_ranks 1 small.cfg $common $family optimizer.lr=2e-3 device=cpu final_weights=cpu.h5 > cpu.log 2>&1 ||
        { cat cpu.log; fail "$name: cpu run"; }
    run_ranks $fr small.cfg $common $family optimizer.lr=2e-3 device=cuda zero_stage=3 final_weights=gpu.h5 > gpu.log 2>&1 ||
        { cat gpu.log; fail "$name: cuda run"; }
    compare "$name, cuda, $fr ranks, stage 3" cpu.log cpu.h5 gpu.log gpu.h5
    run_ranks 1 small.cfg $common $family optimizer.lr=2e-3 device=cpu precision=bf16 > cpu16.log 2>&1 ||
        { cat cpu16.log; fail "$name: cpu bf16 recipe"; }
    run_ranks $fr small.cfg $common $family optimizer.lr=2e-3 device=cuda precision=bf16 zero_stage=3 > gpu16.log 2>&1 ||
        { cat gpu16.log; fail "$name: cuda bf16 recipe"; }
    losses cpu16.log > lref; losses gpu16.log > lrun
    same_losses lrun lref 3e-4 || fail "$name, cuda bf16 recipe: losses differ from the CPU backend's"
    echo "$name, cuda bf16 recipe, $fr ranks, stage 3: ok"
done
echo "device = cuda agrees with device = cpu"
