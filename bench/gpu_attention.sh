#!/bin/sh
# Tensor-core attention on a GPU: ftmpi's bf16 flash attention (forward, backward) against
# PyTorch SDPA (bf16, causal; the FlashAttention-2 backend on sm_80/sm_90) in the same run,
# head dims 64 and 128, sequence lengths 1k-16k at 16k tokens per call, as a ratio.
# Then the masks that skip tiles, ours alone (SDPA has no fast path for them): Mistral's
# sliding window (4096 at seq 16k, hd 128) and packed documents (16k tokens of 1k-token
# documents) and both at hd 64 (window 4096, 2k-token documents); TF/s count only the
# visible pairs, so a skipped tile is not work.
#   bench/gpu_attention.sh           (needs a --with-cuda build in build/; torch for the peer)
# Prints "no GPU" and exits 77 on a machine without one (every machine of this project).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
grep -q "FT_HAVE_CUDA 1" "$build/config.h" && ! grep -q "FT_CUDA_EMULATION 1" "$build/config.h" ||
    { echo "gpu_attention: $build is not a GPU build (./configure --with-cuda)"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mpicc -O2 -std=c11 -I"$top/src" -I"$top/cuda" -I"$build" -I/usr/local/cuda/include \
    -o "$work/bench" "$top/bench/attention_tc_bench.c" "$build/libftmpi.a" \
    $(sed -n 's/^FT_LIBS = //p' "$build/Makefile" | head -n 1) \
    -L/usr/local/cuda/lib64 -lcudart -lcublasLt -lnccl -lm
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
printf "%-4s %-6s %10s %10s %8s %10s %10s %8s\n" hd seq "fwd TF/s" "sdpa" ratio "bwd TF/s" "sdpa" ratio
for hd in 64 128; do
    for seq in 1024 2048 4096 8192 16384; do
        batch=$((16384 / seq)); heads=$((2048 / hd))
        ours=$("$work/bench" $hd $seq $batch $heads)
        peer=$(python3 "$top/bench/attention_sdpa.py" $hd $seq $batch $heads 2>/dev/null || echo "")
        f=$(echo "$ours" | sed -n 's/.*fwd_tflops=\([0-9.]*\).*/\1/p')
        b=$(echo "$ours" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p')
        pf=$(echo "$peer" | sed -n 's/.*fwd_tflops=\([0-9.]*\).*/\1/p')
        pb=$(echo "$peer" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p')
        awk -v hd=$hd -v s=$seq -v f="$f" -v b="$b" -v pf="${pf:-0}" -v pb="${pb:-0}" 'BEGIN {
            printf "%-4d %-6d %10.1f %10.1f %8s %10.1f %10.1f %8s\n", hd, s, f, pf,
                   pf > 0 ? sprintf("%.2f", f / pf) : "-", b, pb, pb > 0 ? sprintf("%.2f", b / pb) : "-" }'
    done
done
printf "\n%-4s %-6s %-8s %-8s %10s %10s\n" hd seq window doc_len "fwd TF/s" "bwd TF/s"
for case in "128 16384 4096 0" "128 16384 0 1024" "64 16384 4096 2048"; do
    set -- $case
    ours=$("$work/bench" $1 $2 1 $((2048 / $1)) $3 $4)
    f=$(echo "$ours" | sed -n 's/.*fwd_tflops=\([0-9.]*\).*/\1/p')
    b=$(echo "$ours" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p')
    printf "%-4s %-6s %-8s %-8s %10s %10s\n" $1 $2 $3 $4 "$f" "$b"
done
