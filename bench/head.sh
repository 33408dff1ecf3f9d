#!/bin/sh
# The LM head + cross-entropy alone, forward + backward, bf16: ftmpi's one-pass head
# (default memory budget), the former 65-row chunking (the weight gradient re-read per
# chunk), and PyTorch's plain one-chunk head on the same device, in one run.
#   bench/head.sh [cpu|cuda] [TOKENS HIDDEN VOCAB]   (needs build/bench/head_bench: make check TESTS=)
# Defaults: cuda 4096 2048 128256 (Llama-3.2-1B's head at seq 4096); cpu 1024 1024 32000.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
device=${1:-cpu}
[ "$device" = cuda ] && . "$top/bench/gpu_env.sh"
if [ "$device" = cuda ]; then N=${2:-4096} H=${3:-2048} V=${4:-128256}; else N=${2:-1024} H=${3:-1024} V=${4:-32000}; fi
bench=$build/bench/head_bench
[ -x "$bench" ] || (cd "$build" && make -s bench/head_bench)
shape="--device $device --tokens $N --hidden $H --vocab $V --dtype bf16"
one=$("$bench" $shape)
old=$("$bench" $shape --group-rows 65 --chunk-rows 65)
torch=$(python3 "$top/bench/head_torch.py" $shape 2>/dev/null || echo "head_ms=nan")
field() { echo "$1" | sed -n "s/.*$2=\([^ ]*\).*/\1/p"; }
echo "LM head + cross-entropy, $N tokens x hidden $H x vocab $V, bf16, $device"
echo "  ftmpi one pass:      $one"
echo "  ftmpi 65-row chunks: $old"
echo "  PyTorch plain:       $torch"
awk -v a="$(field "$one" head_ms)" -v b="$(field "$old" head_ms)" -v t="$(field "$torch" head_ms)" 'BEGIN {
    printf "  one pass / 65-row chunks time: %.2f\n", a / b
    if (t + 0 > 0) printf "  PyTorch / ftmpi time (speed-up over PyTorch): %.2f\n", t / a }'
