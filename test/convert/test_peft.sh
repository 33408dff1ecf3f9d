#!/bin/sh
# PEFT adapters in and out of ftmpi (io/peft_adapter.h, ftmpi-convert export --adapter and
# merge), for a tiny Llama (GQA, all seven projections) and GPT-NeoX (fused
# query_key_value, whose B rows are permuted between NeoX's per-head order and ftmpi's):
#  - PEFT makes a base and an adapter with random non-zero A and B (check_peft.py make);
#  - the adapter directory read and written again is byte-identical (safetensors);
#  - it becomes a LoRA checkpoint (peft_to_ckpt, the reader + a checkpoint writer);
#    plain export refuses that checkpoint in one line; export --adapter gives back the
#    original adapter's tensors byte for byte, and PeftModel.from_pretrained on it gives
#    the original adapter's logits (1e-5);
#  - merge writes a HF model whose logits equal PEFT's base + adapter (1e-5), and
#    ftmpi-generate on the LoRA checkpoint makes PEFT's greedy choices (also over 2 ranks);
#  - the same for a LoRA checkpoint the trainer wrote (6 steps on that base);
#  - bad adapters and bases: one line naming the file and the key, exit 1.
# Needs torch, transformers and peft (reference tools from pip, never a run-time
# dependency of ftmpi): SKIPs without them.
. "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
"$PY" -c "import torch, transformers, peft, safetensors" > py.txt 2>&1 ||
    skip "python3 cannot import torch, transformers, peft and safetensors ($(tail -n 1 py.txt))"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
CHECK="$S/test/convert/check_peft.py"
P2C="$B/test/convert/peft_to_ckpt"

run() { "$@" > log.txt 2>&1 || { cat log.txt; fail "$*"; }; }

mkdir gen   # ftmpi-generate's temporary merged file goes to TMPDIR=gen
for fam in llama gpt_neox; do
    run "$PY" "$CHECK" make $fam $fam
    run "$CONVERT" import -q $fam/base $fam.h5
    run "$P2C" --roundtrip $fam/peft $fam.h5 rt_$fam
    run "$STCMP" $fam/peft/adapter_model.safetensors rt_$fam/adapter_model.safetensors
    run "$P2C" $fam/peft $fam.h5 lora_$fam.h5
    "$CONVERT" inspect lora_$fam.h5 > inspect.txt || fail "inspect lora_$fam.h5"
    grep -q '^/lora:' inspect.txt && grep -q 'base_hash' inspect.txt ||
        { cat inspect.txt; fail "inspect shows no /lora attributes"; }
    expect_fail 1 "export --adapter" "$CONVERT" export lora_$fam.h5 plain_$fam
    run "$CONVERT" export -q --adapter lora_$fam.h5 exp_$fam --base tiny/$fam-base
    grep -q '"base_model_name_or_path": "tiny/'$fam'-base"' exp_$fam/adapter_config.json ||
        { cat exp_$fam/adapter_config.json; fail "--base not in adapter_config.json"; }
    run "$STCMP" $fam/peft/adapter_model.safetensors exp_$fam/adapter_model.safetensors
    "$PY" "$CHECK" adapter $fam/base $fam/peft exp_$fam || fail "$fam: PEFT on the exported adapter"
    run "$CONVERT" merge -q lora_$fam.h5 merged_$fam
    [ ! -e merged_$fam/.ftmpi-merge.h5 ] || fail "merge left its temporary file"
    "$PY" "$CHECK" merged $fam/base $fam/peft merged_$fam || fail "$fam: merged model"
    # ftmpi-generate on the LoRA checkpoint: its base with the adapters merged
    TMPDIR=$SCRATCH/gen "$B/ftmpi-generate" lora_$fam.h5 --ids 1,17,42,5,77,23 --max-new-tokens 12 --ignore-eos \
        > gen_$fam.txt 2> log.txt || { cat log.txt; fail "ftmpi-generate lora_$fam.h5"; }
    "$PY" "$CHECK" greedy $fam/base $fam/peft 1,17,42,5,77,23 "$(cat gen_$fam.txt)" ||
        fail "$fam: ftmpi-generate on the LoRA checkpoint"
    # a LoRA run of the trainer on that base: its checkpoint exports to an adapter that
    # moves PEFT's logits, PEFT on it makes ftmpi-generate's choices, merge equals it
    [ -f train.h5 ] || run "$B/ftmpi-gendata" --rows 48 --seq-len 32 --digits 2 train.h5
    cat > lt.cfg <<CFG
device = "cpu"; max_steps = 6; seed = 3; micro_batch_size = 4; global_batch_size = 4;
model = { weights = "$fam.h5"; };
data = { train = "train.h5"; };
optimizer = { type = "adamw"; lr = 3e-2; };
lora = { rank = 4; alpha = 8.0; };
CFG
    run "$B/ftmpi" lt.cfg checkpoint_dir=ck_$fam
    "$CONVERT" inspect ck_$fam/step-000006.h5 | grep -q "base_hash" ||
        fail "$fam: the trainer's LoRA checkpoint records no base_hash"
    run "$CONVERT" export -q --adapter ck_$fam trained_$fam
    run "$CONVERT" merge -q ck_$fam trained_merged_$fam
    TMPDIR=$SCRATCH/gen "$B/ftmpi-generate" ck_$fam --ids 1,17,42,5,77,23 --max-new-tokens 12 \
        --ignore-eos > gen_t_$fam.txt 2> log.txt || { cat log.txt; fail "ftmpi-generate ck_$fam"; }
    "$PY" "$CHECK" adapter $fam/base trained_$fam trained_$fam &&
    "$PY" "$CHECK" greedy $fam/base trained_$fam 1,17,42,5,77,23 "$(cat gen_t_$fam.txt)" &&
    "$PY" "$CHECK" merged $fam/base trained_$fam trained_merged_$fam ||
        fail "$fam: the trained LoRA checkpoint through PEFT"
    # model.adapter: a run seeded from PEFT's directory holds PEFT's adapters (a step of
    # lr 1e-30 moves no fp32 bit), so its checkpoint exports to PEFT's file bit for bit
    run "$B/ftmpi" lt.cfg max_steps=1 optimizer.lr=1e-30 optimizer.weight_decay=0 \
        "model.adapter=\"$fam/peft\"" checkpoint_dir=ck_seed_$fam
    run "$CONVERT" export -q --adapter ck_seed_$fam seeded_$fam
    run "$STCMP" $fam/peft/adapter_model.safetensors seeded_$fam/adapter_model.safetensors
    # and refuses a lora group that is not the directory's
    expect_fail 2 "adapter_config.json" "$B/ftmpi" lt.cfg max_steps=1 lora.rank=8 \
        "model.adapter=\"$fam/peft\""
done
# over ranks: rank 0 merges, every rank loads the merged file, which is then removed
printf '{"ids": [1, 17, 42]}\n{"ids": [5, 77, 23]}\n' > prompts.jsonl
if command -v mpirun > /dev/null; then
    TMPDIR=$SCRATCH/gen mpirun -np 2 "$B/ftmpi-generate" lora_llama.h5 --ids --prompts prompts.jsonl --out out.jsonl \
        --max-new-tokens 4 --ignore-eos > log.txt 2>&1 || { cat log.txt; fail "ftmpi-generate over 2 ranks"; }
    [ "$(wc -l < out.jsonl)" -eq 2 ] || { cat out.jsonl; fail "2 completions expected"; }
fi
[ -z "$(ls gen)" ] || { ls gen; fail "ftmpi-generate left its merged file"; }

# bad adapter directories (read by peft_to_ckpt through io/peft_adapter.c)
bad() { rm -rf "$1"; cp -r llama/peft "$1"; }
bad nocfg; rm nocfg/adapter_config.json
expect_fail 1 "adapter_config.json" "$P2C" nocfg llama.h5 o.h5
bad wrong_r; sed -i 's/"r": 4,/"r": 8,/' wrong_r/adapter_config.json
expect_fail 1 "has shape [4, 64]; r = 8" "$P2C" wrong_r llama.h5 o.h5
bad unknown; sed -i 's/"q_proj"/"qq_proj"/' unknown/adapter_config.json
expect_fail 1 '"qq_proj" is not a projection of a llama model' "$P2C" unknown llama.h5 o.h5
bad rslora; sed -i 's/"use_rslora": false/"use_rslora": true/' rslora/adapter_config.json
expect_fail 1 '"use_rslora" is set' "$P2C" rslora llama.h5 o.h5
bad nokey; bad shape
"$PY" - <<'PY' || fail "editing the safetensors"
from safetensors.torch import load_file, save_file
import torch
k = "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"
t = load_file("nokey/adapter_model.safetensors"); del t[k]
save_file(t, "nokey/adapter_model.safetensors", metadata={"format": "pt"})
t = load_file("shape/adapter_model.safetensors"); t[k] = torch.zeros(4, 127)
save_file(t, "shape/adapter_model.safetensors", metadata={"format": "pt"})
PY
expect_fail 1 "'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight' [4, 128] is missing" \
    "$P2C" nokey llama.h5 o.h5
expect_fail 1 "'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight' has shape [4, 127]" \
    "$P2C" shape llama.h5 o.h5

# bad bases and inputs of export --adapter and merge
run "$P2C" --base-hash 0123456789abcdef llama/peft llama.h5 other_hash.h5
expect_fail 1 "base_hash 0123456789abcdef" "$CONVERT" merge other_hash.h5 m1
expect_fail 1 "is a gpt_neox model" "$CONVERT" merge lora_llama.h5 m2 --base gpt_neox.h5
expect_fail 1 "base_hash 0123456789abcdef" "$B/ftmpi-generate" other_hash.h5 --ids 1,2 \
    --max-new-tokens 2
expect_fail 1 "not a LoRA checkpoint" "$CONVERT" export --adapter llama.h5 a3
expect_fail 1 "not a LoRA checkpoint" "$CONVERT" merge llama.h5 m3
run "$P2C" --no-hash llama/peft llama.h5 nohash.h5   # no base_hash: merge trusts the shape
run "$CONVERT" merge -q nohash.h5 m4
echo "PASS"
