#!/bin/sh
# The planner (ftmpi --plan) knows LoRA: a LoRA run's plan is the frozen base engine,
# the adapters' engine and the model's activations with the adapters attached, and
#  - it equals the measured peak backend memory of real LoRA runs (CPU backend: stages 0
#    and 3, 1 and 2 ranks, checkpointing on and off, offload, the bf16 recipe, GPT-NeoX's
#    fused query_key_value site);
#  - it is below full fine-tuning's by what LoRA leaves out, computed here from the
#    shape alone: the base's gradients and AdamW moments (12 bytes a parameter) and the
#    trainable engine's staging buffer, less the adapters' own parameters, gradients and
#    moments (16 bytes each), their staging, and LoRA's activations (u per site and
#    layer, the du scratch, the frozen embedding's gradient sink);
#  - lora.dropout adds exactly its scratch buffer, and is planned to the byte too;
#  - its table says LoRA, the trained parameter count, and shows the base apart from the
#    adapters;
#  - the shipped deck input/llama2-70b-lora.cfg fits 80 GiB on 8 ranks without offload.
#  - final_weights with LoRA is refused by the plan with the run's own line and exit 2.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg full.cfg
sed -i 's/max_position_embeddings = 64/max_position_embeddings = 128/' full.cfg
cp full.cfg lora.cfg
echo 'lora = { rank = 4; alpha = 8.0; };' >> lora.cfg

planned() { # CFG N ARGS...: the config's device total in bytes (plan.log keeps the table)
    cfg=$1 n=$2; shift 2
    "$FTMPI" --plan -np "$n" "$cfg" max_steps=2 "$@" > plan.log 2>&1 || { cat plan.log >&2; fail "plan $cfg $*"; }
    sed -n 's/.*(this config: device total \([0-9]*\) bytes).*/\1/p' plan.log
}
check() { # N ARGS...: LoRA's plan = the measured peak
    n=$1; shift
    want=$(planned lora.cfg "$n" "$@")
    rm -f m.jsonl
    run_ranks "$n" lora.cfg max_steps=2 metrics_file=m.jsonl "$@" > run.log 2>&1 || { cat run.log; fail "run $*"; }
    grep -q "LoRA rank 4" run.log || { cat run.log; fail "$*: not a LoRA run"; }
    got=$(metric m.jsonl peak_memory backend_bytes)
    awk -v w="$want" -v g="$got" 'BEGIN { printf "planned %d, measured %d\n", w, g; exit !(w > 0 && w == g) }' ||
        fail "$n ranks $*: the LoRA plan is not the measured peak"
}

# the table: LoRA, the adapters' count (rank 4 x (in + out) of q, k, v, o, gate, up,
# down = 4 x (128 + 96 + 96 + 128 + 3 x 224) = 4480 a layer, 2 layers), the base apart
planned lora.cfg 1 zero_stage=0 >/dev/null
grep -q "^LoRA rank 4, alpha 8 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj: 0.000 B trained parameters (8960, " plan.log ||
    { cat plan.log; fail "no LoRA line with the trained parameter count"; }
grep -q "stage offload ckpt |     base gathered adapters activations |   device     host | fits" plan.log ||
    { cat plan.log; fail "no LoRA column header"; }
[ "$(grep -c '^[ *] *[0-3] ' plan.log)" -eq 16 ] || { cat plan.log; fail "not 16 rows"; }
grep -q "(this config's parts: base [0-9]*, gathered [0-9]*, adapters [0-9]*, activations [0-9]* bytes)" plan.log ||
    { cat plan.log; fail "no byte parts of this config"; }
# what the recompute (1 of 2 blocks) adds to the step's model FLOPs: LoRA's are 4 N + 6
# N_adapters a token (the frozen weights take no weight gradient) where full fine-tuning's
# are 6 N, so the same recompute is a larger share; derived here from the shape (N: the
# blocks' and the head's matrices; keys, the mean a query sees: (64 + 1) / 2; a block's
# recompute: gate and up, q, k, v, o and attention)
share() { sed -n "s/^ckpt on: the recompute adds \([0-9.]*\) % to the step's model FLOPs.*/\1/p" plan.log; }
lora_share=$(share)
planned lora.cfg 1 zero_stage=0 lora.rank=0 >/dev/null
want=$(awk 'BEGIN { H = 64; I = 160; L = 2; Q = 64; KV = 32; V = 259; keys = 32.5; A = 8960;
    N = L * (H * (Q + 2 * KV + H) + 3 * H * I) + V * H; att = 12 * L * Q * keys;
    r = 4 * H * I + 2 * H * (Q + 2 * KV) + 2 * Q * H + 4 * keys * Q;
    printf "%.1f %.1f", 100 * r / (4 * N + 6 * A + att), 100 * r / (6 * N + att) }')
[ "$lora_share $(share)" = "$want" ] ||
    fail "the recompute's share of the model FLOPs (LoRA, full): $lora_share $(share), want $want"
# lora.rank=0 on the command line switches the group off: the full fine-tuning table
planned lora.cfg 1 lora.rank=0 >/dev/null
grep -q "LoRA\|adapters" plan.log && { cat plan.log; fail "lora.rank=0 still plans LoRA"; }
grep -q "|   params    grads optimizer gathered activations |" plan.log || { cat plan.log; fail "no full table"; }
# an unknown target: the config's one line, exit 2, as a run would
"$FTMPI" --plan -np 1 lora.cfg 'lora.targets=["q_proj", "fc_in"]' > bad.log 2>&1
[ $? -eq 2 ] && [ "$(wc -l < bad.log)" -eq 1 ] && grep -q 'lora.targets.*fc_in' bad.log ||
    { cat bad.log; fail "unknown target: not one line with exit 2"; }
# final_weights with LoRA: the plan refuses it with the run's own line and exit status, for
# the key in the file (named by file:line) and on the command line
cp lora.cfg lora_fw.cfg && echo 'final_weights = "fw.h5";' >> lora_fw.cfg
fw_line=$(wc -l < lora_fw.cfg)
for args in "lora_fw.cfg" "lora.cfg final_weights=fw.h5"; do
    case $args in
        lora_fw.cfg) where="lora_fw.cfg:$fw_line: final_weights" ;;
        *) where="command line: final_weights=fw.h5" ;;
    esac
    want="ftmpi: $where: a LoRA run trains adapters, not a model: drop final_weights and take the adapters from a checkpoint with \`ftmpi-convert export --adapter\` (PEFT) or \`ftmpi-convert merge\` (a full model)"
    run_ranks 1 $args max_steps=2 > fw_run.log 2>&1; run_rc=$?
    "$FTMPI" --plan -np 1 $args max_steps=2 > fw_plan.log 2>&1; plan_rc=$?
    [ $run_rc -eq 2 ] && [ "$(cat fw_run.log)" = "$want" ] ||
        { cat fw_run.log; fail "$args: the run does not refuse final_weights with LoRA as expected (exit $run_rc)"; }
    [ $plan_rc -eq 2 ] && [ "$(cat fw_plan.log)" = "$want" ] ||
        { cat fw_plan.log; fail "$args: --plan exit $plan_rc, or its message is not the run's"; }
    [ -e fw.h5 ] && fail "$args: final_weights written"
done
"$FTMPI" --plan -np 1 lora_fw.cfg max_steps=2 lora.rank=0 > fw_plan.log 2>&1 || { cat fw_plan.log; fail "final_weights without LoRA: plan refused"; }

# smaller than full fine-tuning by what LoRA leaves out (stage 0, fp32, 1 rank: nothing
# padded, one copy of everything). N and the units from the shape:
# vocab 259, hidden 64, kv 2 x 16, intermediate 160, 2 layers, untied head.
for ck in false true; do
    full=$(planned full.cfg 1 zero_stage=0 activation_checkpointing=$ck)
    lora=$(planned lora.cfg 1 zero_stage=0 activation_checkpointing=$ck)
    awk -v f="$full" -v l="$lora" -v ck=$ck 'BEGIN {
        V = 259; H = 64; KV = 32; I = 160; L = 2; r = 4; tokens = 2 * 64;
        block = 2 * H * H + 2 * H * KV + 3 * H * I + 2 * H;
        N = 2 * V * H + L * block + H;
        adapter_unit = r * (2 * H + 2 * (H + KV) + 2 * H + 3 * (H + I));
        Na = L * adapter_unit;
        sets = ck == "true" ? 1 : L;              # saved block activations
        lora_acts = 4 * (2 * H) + 4 * tokens * r * (1 + sets * 7);
        # the gradient norm sums, a double a unit: L + 2 units in full, L adapter units
        norm_sums = 8 * (L + 2) - 8 * L;
        # (neither engine holds a load staging buffer; the frozen base loads in place)
        want = 12 * N - 16 * Na - lora_acts + norm_sums;
        printf "checkpointing %s: full %d - LoRA %d = %d, expected %d\n", ck, f, l, f - l, want;
        exit !(f - l == want) }' || fail "LoRA is not full fine-tuning less the base's gradients and moments (checkpointing $ck)"
done
# lora.dropout adds one scratch buffer: tokens x the widest adapter input (down_proj's
# intermediate 160), fp32
nodrop=$(planned lora.cfg 1 zero_stage=0)
drop=$(planned lora.cfg 1 zero_stage=0 lora.dropout=0.1)
[ $((drop - nodrop)) -eq $((2 * 64 * 160 * 4)) ] ||
    fail "dropout: plan $drop - $nodrop, expected the scratch of $((2 * 64 * 160 * 4)) bytes"
full3=$(planned full.cfg 2 zero_stage=3)
lora3=$(planned lora.cfg 2 zero_stage=3)
[ "$lora3" -lt "$full3" ] || fail "stage 3: LoRA $lora3 not below full $full3"

check 1 zero_stage=0 activation_checkpointing=false
check 1 zero_stage=0 activation_checkpointing=true micro_batch_size=4
check 1 zero_stage=3
check 1 zero_stage=0 precision=bf16
check 1 zero_stage=0 lora.dropout=0.1
# GPT-NeoX: one fused query_key_value site, LayerNorm
check 1 zero_stage=0 model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4
if have_mpirun; then
    check 2 zero_stage=0 activation_checkpointing=false
    check 2 zero_stage=3 activation_checkpointing=false
    check 2 zero_stage=3 offload_optimizer=true
    check 2 zero_stage=3 precision=bf16
    check 2 zero_stage=3 precision=bf16 lora.dropout=0.1
fi

# the shipped deck: Llama 2 70B, rank 16 on all seven projections, seq 4096, bf16,
# ZeRO-3, checkpointing, 8 ranks of 80 GiB without offload
"$FTMPI" --plan "$S/input/llama2-70b-lora.cfg" -np 8 --seq-len 4096 > p70.log 2>&1 || { cat p70.log; fail "70B LoRA plan"; }
grep -q "68.977 B parameters" p70.log && grep -q "LoRA rank 16, alpha 32 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj: 0.207 B trained parameters (207093760, " p70.log ||
    { cat p70.log; fail "70B LoRA: parameter counts"; }
grep -E '^\* +3 +no +on ' p70.log | grep -q 'yes$' || { cat p70.log; fail "70B LoRA at stage 3 without offload should fit 80 GiB on 8 ranks"; }
echo "the LoRA plan equals the measured peaks"
