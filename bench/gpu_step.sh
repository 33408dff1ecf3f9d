#!/bin/sh
# A training step on one GPU: ftmpi (device = "cuda") against Hugging Face + PyTorch
# (bf16 autocast, fp32 master weights, SDPA, gradient checkpointing) for the Llama-3.2-1B
# shape at seq 4096, in the same run: tokens/s of each and their ratio, and ftmpi's MFU
# from its own step line (model FLOPs / the GPU's bf16 dense peak it assumes).
#   bench/gpu_step.sh [EXTRA ftmpi KEY=VALUE ...]   (needs a --with-cuda build in build/)
# ftmpi runs its bf16 recipe (precision = "bf16": bf16 weights, activations and GEMM
# operands on the tensor cores, fp32 master, moments and gradient accumulation); pass
# precision=fp32 to time the fp32 path instead.
# Prints "no GPU" and exits 77 on a machine without one (every machine of this project).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
grep -q "FT_CUDA_EMULATION 1" "$build/config.h" && { echo "gpu_step: $build is the CPU harness build"; exit 1; }
L=16 H=2048 NH=32 NKV=8 FFN=8192 V=128256 T=4096 BATCH=1 STEPS=8
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
"$build/ftmpi-gendata" --rows 64 --seq-len $T train.h5 >/dev/null  # byte tokens: any vocab >= 259
cat > step.cfg <<CFG
device = "cuda"; precision = "bf16"; max_steps = $STEPS; seed = 1; micro_batch_size = $BATCH; global_batch_size = $BATCH;
activation_checkpointing = true; grad_clip = 1.0; log_every = 1;
model = { vocab_size = $V; hidden_size = $H; intermediate_size = $FFN; num_hidden_layers = $L;
          num_attention_heads = $NH; num_key_value_heads = $NKV; max_position_embeddings = $T;
          rope_theta = 500000.0; tie_word_embeddings = true; };
data = { train = "train.h5"; };
optimizer = { type = "adamw"; lr = 1e-5; weight_decay = 0.1; };
CFG
"$build/ftmpi" step.cfg "$@" > ftmpi.log 2>&1 || { tail -n 20 ftmpi.log; exit 1; }
ft=$(sed -n 's/^step .*| tok\/s \([0-9.]*\) .*/\1/p' ftmpi.log | tail -n +4 | sort -n |
     awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
mfu=$(sed -n 's/^step .*| mfu \([0-9.]*\)% .*/\1/p' ftmpi.log | tail -n 1)
peer=$(python3 "$top/bench/gpu_step_torch.py" $L $H $NH $NKV $FFN $V $T $BATCH --tied || echo "")
pt=$(echo "$peer" | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
awk -v ft="$ft" -v pt="${pt:-0}" -v mfu="$mfu" 'BEGIN {
    printf "ftmpi %.0f tok/s (MFU %s%%), HF+PyTorch %.0f tok/s, ratio %s\n", ft, mfu, pt,
           pt > 0 ? sprintf("%.2f", ft / pt) : "-" }'
