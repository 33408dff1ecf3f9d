#!/bin/sh
# The planner (ftmpi --plan) predicts the measured peak backend memory of real runs
# exactly (CPU configs: stages 0-3, checkpointing on/off, offload, 1-2 ranks, both
# numerics recipes): the plan is a dry run of the same allocations. It also plans the
# shipped large-model decks without allocating.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
sed -i 's/max_position_embeddings = 64/max_position_embeddings = 128/' small.cfg
check() { # N ARGS...
    n=$1; shift
    "$FTMPI" --plan -np "$n" small.cfg max_steps=2 "$@" > plan.log 2>&1 || { cat plan.log; fail "plan $*"; }
    want=$(sed -n 's/.*(this config: device total \([0-9]*\) bytes).*/\1/p' plan.log)
    rm -f m.jsonl
    run_ranks "$n" small.cfg max_steps=2 metrics_file=m.jsonl "$@" > run.log 2>&1 || { cat run.log; fail "run $*"; }
    got=$(metric m.jsonl peak_memory backend_bytes)
    awk -v w="$want" -v g="$got" 'BEGIN { printf "planned %d, measured %d\n", w, g; exit !(w == g) }' ||
        fail "$n ranks $*: the plan is not the measured peak"
}
check 1 zero_stage=0 activation_checkpointing=false
check 1 zero_stage=0 activation_checkpointing=true micro_batch_size=4
# the first 2 of 4 blocks checkpointed: one set of activations for both, one for each other
check 1 zero_stage=0 model.num_hidden_layers=4 activation_checkpointing=true checkpoint_layers=2
grep -q 'ckpt on: blocks 0-1 of 4 recompute' plan.log || { cat plan.log; fail "the plan does not say which blocks recompute"; }
grep -q 'checkpointing on for blocks 0-1 of 4' run.log || { cat run.log; fail "the run does not say which blocks recompute"; }
# the recomputing blocks 0 and 1 keep their attention parts: planned exactly too
check 1 zero_stage=0 model.num_hidden_layers=4 activation_checkpointing=true checkpoint_layers=3 checkpoint_keep_attention=true
grep -q 'checkpointing on for blocks 0-2 of 4, attention kept' run.log || { cat run.log; fail "the run does not say that attention is kept"; }
grep -q 'ckpt on: the recomputing blocks keep their attention halves' plan.log || { cat plan.log; fail "the plan does not say that attention is kept"; }
# ... or only attention's output and log-sum-exp
check 1 zero_stage=0 model.num_hidden_layers=4 activation_checkpointing=true checkpoint_keep_attention_output=true
grep -q "checkpointing on, attention's output kept" run.log || { cat run.log; fail "the run does not say that attention's output is kept"; }
grep -q "ckpt on: the recomputing blocks keep attention's output" plan.log || { cat plan.log; fail "the plan does not say that attention's output is kept"; }
# what the recompute adds to the step's model FLOPs, derived here from the shape: per
# token 6 N + 12 L heads head_dim keys (N: the blocks' and the head's matrices; keys, the
# mean a query sees: (64 + 1) / 2), and per recomputed block (3 of 4) gate and up, unless
# the attention half is kept q, k, v and o, unless its output is kept too attention
share() { "$FTMPI" --plan small.cfg model.num_hidden_layers=4 "$@" |
    sed -n "s/^ckpt on: the recompute adds \([0-9.]*\) % to the step's model FLOPs.*/\1/p"; }
want=$(awk 'BEGIN { H = 64; I = 160; L = 4; Q = 64; KV = 32; V = 259; keys = 32.5;
    N = L * (H * (Q + 2 * KV + H) + 3 * H * I) + V * H; model = 6 * N + 12 * L * Q * keys;
    mlp = 4 * H * I; proj = 2 * H * (Q + 2 * KV) + 2 * Q * H; att = 4 * keys * Q;
    printf "%.1f %.1f %.1f", 300 * (mlp + proj + att) / model, 300 * (mlp + proj) / model,
        300 * mlp / model }')
got="$(share) $(share checkpoint_keep_attention_output=true) $(share checkpoint_keep_attention=true)"
[ "$got" = "$want" ] || fail "the recompute's share of the model FLOPs (nothing, output, attention kept): $got, want $want"
# the fastest checkpointing that fits: the least recompute (FLOPs) among the settings
# that fit. This model's totals: none > 2 blocks > 3 blocks with kept attention > 3 with
# kept attention output > 3 blocks > 4 blocks + kept attention > 4 + kept output > 4
# blocks; its recompute: 2 blocks with kept attention < 2 blocks < 3 with kept attention
# < 4 with kept attention < 3 blocks < 4 with kept output < 4 blocks (the attention half
# is nearly half of its recompute)
total() { "$FTMPI" --plan small.cfg model.num_hidden_layers=4 activation_checkpointing=true "$@" |
    sed -n 's/.*(this config: device total \([0-9]*\) bytes).*/\1/p'; }
t2=$(total checkpoint_layers=2) t3=$(total checkpoint_layers=3) t0=$(total activation_checkpointing=false)
t4=$(total) t3k=$(total checkpoint_layers=3 checkpoint_keep_attention=true)
t4k=$(total checkpoint_keep_attention=true)
t3o=$(total checkpoint_layers=3 checkpoint_keep_attention_output=true)
t4o=$(total checkpoint_keep_attention_output=true)
[ "$t0" -gt "$t2" ] && [ "$t2" -gt "$t3k" ] && [ "$t3k" -gt "$t3o" ] && [ "$t3o" -gt "$t3" ] &&
    [ "$t3" -gt "$t4k" ] && [ "$t4k" -gt "$t4o" ] && [ "$t4o" -gt "$t4" ] ||
    fail "activation totals should fall with more checkpointed blocks and less kept: $t0 $t2 $t3k $t3o $t3 $t4k $t4o $t4"
fit() { # GIB: the plan's last line
    "$FTMPI" --plan small.cfg model.num_hidden_layers=4 --device-memory "$1" | tail -n 1; }
gib_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.9f", (a + b) / 2 / 1073741824 }'; }
# between 2 blocks and 3 with kept attention: 3 with kept attention (less recompute than 3
# without, or 4 with or without)
between=$(gib_between "$t2" "$t3k")
fit "$between" | grep -q 'checkpoint_layers = 3; checkpoint_keep_attention = true (blocks 0-2 of 4 recompute, attention kept' ||
    { fit "$between"; fail "the fastest fit at $between GiB should be checkpoint_layers = 3 with kept attention"; }
# between 4 blocks with kept attention and 4 with its output kept: the latter
between=$(gib_between "$t4k" "$t4o")
fit "$between" | grep -q "activation_checkpointing = true; checkpoint_keep_attention_output = true (every block recomputes, attention's output kept; device" ||
    { fit "$between"; fail "the fastest fit at $between GiB should be every block with attention's output kept"; }
# between 4 blocks and 4 with attention's output kept: only every block keeping nothing fits
between=$(gib_between "$t4o" "$t4")
fit "$between" | grep -q 'activation_checkpointing = true (every block recomputes; device' ||
    { fit "$between"; fail "the fastest fit at $between GiB should be every block keeping nothing"; }
fit 80 | grep -q 'fastest fit at stage 0: activation_checkpointing = false' ||
    { fit 80; fail "at 80 GiB the fastest fit is no checkpointing"; }
fit 0.0001 | grep -q 'none: even with every block checkpointed' ||
    { fit 0.0001; fail "at 0.0001 GiB nothing fits"; }
# the families' extra buffers (qwen3: q/k before their norms) are planned too
check 1 zero_stage=0 activation_checkpointing=false model.family=qwen3 model.head_dim=24
# LayerNorm means, GELU without a gate, GPT-J's shared norm (no second norm's buffers)
check 1 zero_stage=0 activation_checkpointing=false model.family=gptj model.num_key_value_heads=4 model.rotary_dim=8
check 1 zero_stage=0 precision=bf16 model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true
if have_mpirun; then
    check 2 zero_stage=1 activation_checkpointing=true
    check 2 zero_stage=2 model.param_dtype=bf16 global_batch_size=16
    check 2 zero_stage=3 activation_checkpointing=false
    check 2 zero_stage=3 offload_optimizer=true
    # the bf16 recipe: bits-only working weights and gathers, bf16 activations
    check 2 zero_stage=3 precision=bf16
    check 2 zero_stage=2 precision=bf16 grad_reduce_dtype=bf16 global_batch_size=16
    check 2 zero_stage=0 precision=bf16 offload_optimizer=true
    # bf16 reduction beside the backward: two staging buffers (one with the overlap off)
    check 2 zero_stage=0 grad_reduce_dtype=bf16
    export FTMPI_REDUCE_OVERLAP=0
    check 2 zero_stage=1 precision=bf16 grad_reduce_dtype=bf16
    unset FTMPI_REDUCE_OVERLAP
fi
check 1 zero_stage=1 precision=bf16 activation_checkpointing=false
# large decks: planned without allocating, 70B on 16 ranks fits 80 GiB at stage 3 + offload
"$FTMPI" --plan "$S/input/llama3-70b.cfg" -np 16 --seq-len 4096 > p70.log 2>&1 || { cat p70.log; fail "70B plan"; }
grep -q "70.554 B parameters" p70.log || { cat p70.log; fail "70B parameter count"; }
grep -E '^. +3 +yes +on ' p70.log | grep -q 'yes$' || { cat p70.log; fail "70B stage 3 + offload + ckpt should fit 80 GiB on 16 ranks"; }
grep -E '^. +0 +no +off ' p70.log | grep -q 'no$' || { cat p70.log; fail "70B stage 0 cannot fit 80 GiB"; }
# issue #12's reference run: Llama 2 70B, 2 nodes x 8 A100 80 GB, bf16, activation
# checkpointing, seq 4096, no offload: the deck (precision and gradient reduction bf16)
# plans under 80 GiB per rank at ZeRO-3 without offload
"$FTMPI" --plan "$S/input/llama2-70b.cfg" -np 16 --seq-len 4096 > p2.log 2>&1 || { cat p2.log; fail "Llama 2 70B plan"; }
grep -E '^\* +3 +no +on ' p2.log | grep -q 'yes$' || { cat p2.log; fail "Llama 2 70B bf16 at stage 3 without offload should fit 80 GiB on 16 ranks"; }
# the families' decks: parameter counts of the public models (biases and q/k norms counted)
for deck in "qwen2.5-7b 7.616" "qwen3-8b 8.191" "mistral-7b-v0.3 7.248" "pythia-6.9b 6.857" \
            "gpt-j-6b 6.051"; do
    set -- $deck
    "$FTMPI" --plan "$S/input/$1.cfg" -np 8 --seq-len 4096 > pf.log 2>&1 || { cat pf.log; fail "$1 plan"; }
    grep -q "$2 B parameters" pf.log || { cat pf.log; fail "$1 parameter count"; }
done
"$FTMPI" --plan "$S/input/llama3-70b.cfg" -np 0 > bad.log 2>&1 && fail "-np 0 accepted"
grep -q "needs a positive integer" bad.log || fail "unclear -np error"
# the batch geometry is checked for the -np given, as a run on that many ranks would
"$FTMPI" --plan "$S/input/llama3-70b.cfg" -np 3 --seq-len 4096 > geo.log 2>&1
[ $? -eq 2 ] || { cat geo.log; fail "-np 3 with global_batch_size 64: not exit 2"; }
[ "$(wc -l < geo.log)" -eq 1 ] && grep -q "global_batch_size: 64 is not a multiple of micro_batch_size 1 x 3 ranks" geo.log ||
    { cat geo.log; fail "-np 3: no one-line batch geometry error"; }
echo "planner equals the measured peaks"
