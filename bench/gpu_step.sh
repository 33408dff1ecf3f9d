#!/bin/sh
# A training step on one GPU, ftmpi (device = "cuda") against Hugging Face + PyTorch (bf16
# autocast over fp32 masters, SDPA, gradient checkpointing, fused AdamW) on the same data
# file, for the Llama-3.2-1B shape and an 8B shape (Llama 3 8B with its layers cut to fit
# one 80 GB GPU), seq 4096, batch 1, in one run:
#   bench/gpu_step.sh [--shape 1b|8b|all] [--docs N] [--no-checkpointing] [ftmpi KEY=VALUE ...]
#     --shape  which shapes (default all); LAYERS_8B=n sets the 8B shape's layers (default 8)
#     --docs N packed documents of N/2..3N/2 tokens (mean N) on both sides: ftmpi's
#              document masks; HF with positions restarting per document and a 4-D
#              block-causal mask. Default: no documents on either side (plain causal).
#     --no-checkpointing  neither side recomputes (ftmpi activation_checkpointing = false,
#              HF without gradient checkpointing): what a model that fits without it runs.
#              Default: every block checkpointed on both sides.
# (needs a --with-cuda build in build/ or $FTMPI_BUILD, and torch, transformers and h5py
# for the peer and the data file, which bench/gpu_step_torch.py writes: random tokens over
# the whole vocabulary, every token a target)
# Prints for each side tokens/s, MFU and peak memory, and the ratios. MFU here is the
# standard one, computed the same way for both: model FLOPs per token, 6 N (N: the weights
# of every matmul, the LM head's included, not the embedding lookup) plus attention
# 12 L d a (a: mean keys a query sees under the mask used, from the data file), times
# tokens/s, over the GPU's dense bf16 datasheet peak (989 TFLOP/s H100 SXM and H200;
# PEAK_TFLOPS=x for another card). ftmpi's own printed MFU is shown beside it.
# Peak memory: ftmpi's backend peak ("peak backend memory per rank"), PyTorch's
# max_memory_allocated. ftmpi runs its bf16 recipe (precision = "bf16"); extra arguments go
# to ftmpi (precision=fp32 times the fp32 path). GPU_STEP_LOGS=DIR keeps ftmpi's log and the
# peer's stderr there (ftmpi-SHAPE.log, torch-SHAPE.err); ftmpi's start-up line is printed.
# GPU_STEP_PEER=0 runs ftmpi alone (an A/B of ftmpi settings; the peer's row says "not run").
# ftmpi runs with profile_phases = true: its last step's time by phase is printed too.
# Prints "no GPU" and exits 77 on a machine without one.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
usage() { echo "usage: bench/gpu_step.sh [--shape 1b|8b|all] [--docs N] [--no-checkpointing] [ftmpi KEY=VALUE ...]" >&2; exit 2; }
shapes=all docs=0 ckpt=true
while [ $# -gt 0 ]; do
    case $1 in
        --shape) [ $# -ge 2 ] || usage; shapes=$2; shift 2;;
        --docs) [ $# -ge 2 ] || usage; docs=$2; shift 2;;
        --no-checkpointing) ckpt=false; shift;;
        --help|-h) usage;;
        --) shift; break;;
        -*) echo "gpu_step: unknown option $1" >&2; usage;;
        *) break;;
    esac
done
case $shapes in 1b|8b) ;; all) shapes="1b 8b";; *) echo "gpu_step: --shape $shapes: expected 1b, 8b or all" >&2; exit 2;; esac
case $docs in ''|*[!0-9]*) echo "gpu_step: --docs $docs: expected a token count (0: no documents)" >&2; exit 2;; esac
[ "$docs" -eq 1 ] && { echo "gpu_step: --docs 1: documents need at least 2 tokens" >&2; exit 2; }
L8=${LAYERS_8B:-8}
case $L8 in ''|*[!0-9]*|0) echo "gpu_step: LAYERS_8B=$L8: expected a positive layer count" >&2; exit 2;; esac
[ "${GPU_STEP_PARSE_ONLY:-0}" = 1 ] && { echo "shapes=$shapes docs=$docs checkpointing=$ckpt layers_8b=$L8 ftmpi_args=$*"; exit 0; }

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
. "$top/bench/gpu_env.sh"
ft_gpu_build gpu_step || exit 1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then  # dense bf16 datasheet peaks
    case $gpu in
        *H100*PCIe*) peak=756;; *H100*NVL*) peak=835;; *H100*|*H200*) peak=989;;
        *A100*) peak=312;; *L40S*) peak=362;; *B200*) peak=2250;;
        *) echo "gpu_step: no datasheet peak for '$gpu': set PEAK_TFLOPS" >&2; exit 1;;
    esac
fi
T=4096 BATCH=1 STEPS=8
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
[ "$docs" -gt 0 ] && what="packed documents of ~$docs tokens (document masks on both sides)" ||
    what="no documents (causal attention on both sides)"
[ $ckpt = true ] && recompute="every block checkpointed on both sides" ||
    recompute="no checkpointing on either side"
echo "$gpu; MFU over $peak TFLOP/s; seq $T, batch $BATCH; data: $what; $recompute"
printf "%-5s %-11s %10s %8s %13s %10s\n" shape side "tok/s" MFU "MFU printed" "peak GiB"
for shape in $shapes; do
    if [ "$shape" = 1b ]; then L=16 H=2048 NH=32 NKV=8 FFN=8192 V=128256 TIED=true
    else L=$L8 H=4096 NH=32 NKV=8 FFN=14336 V=128256 TIED=false; fi
    info=$(python3 "$top/bench/gpu_step_torch.py" data data.h5 --rows $((BATCH * STEPS)) --seq $T \
           --vocab $V --doc-len "$docs") || { echo "gpu_step: could not write the data file (h5py?)"; exit 1; }
    vis=$(echo "$info" | sed -n 's/.*avg_visible=\([0-9.]*\).*/\1/p')
    cat > step.cfg <<CFG
device = "cuda"; precision = "bf16"; max_steps = $STEPS; seed = 1; micro_batch_size = $BATCH; global_batch_size = $BATCH;
activation_checkpointing = $ckpt; grad_clip = 1.0; log_every = 1; profile_phases = true;
model = { vocab_size = $V; hidden_size = $H; intermediate_size = $FFN; num_hidden_layers = $L;
          num_attention_heads = $NH; num_key_value_heads = $NKV; max_position_embeddings = $T;
          rope_theta = 500000.0; tie_word_embeddings = $TIED; };
data = { train = "data.h5"; };
optimizer = { type = "adamw"; lr = 1e-5; weight_decay = 0.1; warmup_steps = 0; };
CFG
    rm -f ftmpi-$shape.jsonl
    keep() { [ -n "${GPU_STEP_LOGS:-}" ] && cp -f "$@" "$GPU_STEP_LOGS/" 2>/dev/null; true; }
    "$build/ftmpi" step.cfg metrics_file=ftmpi-$shape.jsonl "$@" > ftmpi-$shape.log 2>&1 ||
        { keep ftmpi-$shape.log; tail -n 20 ftmpi-$shape.log; exit 1; }
    keep ftmpi-$shape.log
    sed -n "s/^ftmpi: \(start-up\|MFU peak\)/$shape  ftmpi \1/p" ftmpi-$shape.log | head -n 2
    # whether the next step's lookup read its embedding rows before the embedding's update
    sed -n "s/^ftmpi: \(the next step's embedding rows .*\)/$shape  ftmpi \1/p" ftmpi-$shape.log
    # the last step's time by phase (the device's time: events on ftmpi's stream)
    sed -n "s/^ftmpi: \(step [0-9]* by phase\)/$shape  ftmpi \1/p" ftmpi-$shape.log | tail -n 1
    # the median of the steps after the first 3 (start-up, allocator warm-up)
    ft=$(sed -n 's/^step .*| tok\/s \([0-9.]*\) .*/\1/p' ftmpi-$shape.log | tail -n +4 | sort -n |
         awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : 0 }')
    ftmfu=$(sed -n 's/^step .*| mfu \([0-9.]*\)% .*/\1/p' ftmpi-$shape.log | tail -n 1)
    # exact bytes: the metrics file (the log rounds to MiB/GiB)
    ftmem=$(sed -n 's/.*"kind":"peak_memory".*"backend_bytes":\([0-9]*\).*/\1/p' ftmpi-$shape.jsonl)
    peer_flags=""; [ "$TIED" = true ] && peer_flags=--tied
    [ $ckpt = true ] || peer_flags="$peer_flags --no-checkpointing"
    peer=""
    if [ "${GPU_STEP_PEER:-1}" != 0 ]; then
        peer=$(python3 "$top/bench/gpu_step_torch.py" step data.h5 "$L" $H $NH $NKV $FFN $V $BATCH \
               $peer_flags --steps $STEPS 2> torch-$shape.err) || { tail -n 3 torch-$shape.err; peer=""; }
        keep torch-$shape.err
    fi
    pt=$(echo "$peer" | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
    ptmem=$(echo "$peer" | sed -n 's/.*peak_mem_bytes=\([0-9]*\).*/\1/p')
    awk -v s="$shape" -v L="$L" -v H="$H" -v nh="$NH" -v kv="$NKV" -v ffn="$FFN" -v V="$V" -v vis="$vis" \
        -v peak="$peak" -v ft="${ft:-0}" -v ftmfu="${ftmfu:--}" -v ftmem="${ftmem:-0}" -v pt="${pt:-0}" \
        -v ptmem="${ptmem:-0}" -v peer_run="$([ "${GPU_STEP_PEER:-1}" != 0 ] && echo 1 || echo 0)" 'BEGIN {
        hd = H / nh
        n = L * (H * (nh + 2 * kv) * hd + nh * hd * H + 3 * H * ffn) + V * H  # matmul weights
        per_tok = 6 * n + 12 * L * nh * hd * vis
        mfu_ft = ft * per_tok / (peak * 1e12) * 100; mfu_pt = pt * per_tok / (peak * 1e12) * 100
        printf "%-5s %-11s %10.0f %7.1f%% %12s%% %10.2f\n", s, "ftmpi", ft, mfu_ft, ftmfu, ftmem / 2^30
        if (pt > 0) printf "%-5s %-11s %10.0f %7.1f%% %13s %10.2f\n", s, "HF+PyTorch", pt, mfu_pt, "-", ptmem / 2^30
        else printf "%-5s %-11s %10s\n", s, "HF+PyTorch", peer_run ? "failed" : "not run"
        r_tok = pt > 0 ? sprintf("%.2f", ft / pt) : "-"; r_mem = ptmem > 0 ? sprintf("%.2f", ftmem / ptmem) : "-"
        printf "%-5s %-11s %10s %8s %13s %10s   (model %.2f GFLOP/token, N %.3f B)\n", s, "ftmpi/HF", r_tok,
               r_tok, "", r_mem, per_tok / 1e9, n / 1e9 }'
done
