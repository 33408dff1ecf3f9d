#!/bin/sh
# Attention on a GPU, in one run: ftmpi's bf16 attention (forward, backward) on its own
# tensor-core kernels ("own") and on its cuDNN path ("cuDNN path": the default of a build
# with cuDNN) against PyTorch SDPA's cuDNN backend (SDPA's default on Hopper) and its
# FlashAttention-2 backend, bf16, causal, head dims 64 and 128, sequence lengths 1k, 4k and
# 16k at 16k tokens per call (heads = 2048 / head_dim), TFLOP/s and ftmpi's ratio to each.
# Then the masks that skip tiles, ours alone (SDPA has no fast path for them): Mistral's
# sliding window (4096 at seq 16k, hd 128) and packed documents (16k tokens of 1k-token
# documents) and both at hd 64 (window 4096, 2k-token documents); TF/s count only the
# visible pairs, so a skipped tile is not work.
#   bench/gpu_attention.sh      (a --with-cuda build in build/ or $FTMPI_BUILD; torch for the peers)
# The timing program, bench/attention_tc_bench, is built with the build's test programs
# (make check TESTS=), linked like them; this script builds it if it is missing.
# Prints "no GPU" and exits 77 on a machine without one.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
. "$top/bench/gpu_env.sh"
grep -q "FT_HAVE_CUDA 1" "$build/config.h" && ! grep -q "FT_CUDA_EMULATION 1" "$build/config.h" ||
    { echo "gpu_attention: $build is not a GPU build (./configure --with-cuda)"; exit 1; }
bench=$build/bench/attention_tc_bench
[ -x "$bench" ] || make -C "$build" bench/attention_tc_bench >/dev/null ||
    { echo "gpu_attention: cannot build $bench (make -C $build bench/attention_tc_bench)"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1

shapes=""
for hd in 64 128; do
    for seq in 1024 4096 16384; do
        shapes="$shapes $hd:$seq:$((16384 / seq)):$((2048 / hd))"
        "$bench" $hd $seq $((16384 / seq)) $((2048 / hd)) | sed 's/^tc_attention /ftmpi /' >> "$work/times"
        "$bench" --cudnn $hd $seq $((16384 / seq)) $((2048 / hd)) |
            sed 's/^cudnn_attention /ftcudnn /' >> "$work/times"
    done
done
# both SDPA backends in one Python process (torch starts once); a backend that does not
# take a shape prints "unavailable" and its columns show "-"
# shellcheck disable=SC2086 # $shapes is a list of words
python3 "$top/bench/attention_sdpa.py" --backends cudnn,flash $shapes 2>"$work/sdpa.err" |
    sed -n 's/^sdpa backend=cudnn /cudnn /p; s/^sdpa backend=flash /fa2 /p' >> "$work/times" ||
    true
[ -s "$work/sdpa.err" ] && { echo "(SDPA peers: $(tail -n 1 "$work/sdpa.err"))"; }
# one row per shape: TF/s of the three, and ftmpi's ratio to each (forward, then backward)
awk '
function val(line, key,   m) { return match(line, " " key "=[0-9.]+") ? substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2) : "" }
function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
function show(x) { return x == "" ? "-" : x }
{ k = val($0, "hd") ":" val($0, "seq"); who = $1
  f[who, k] = val($0, "fwd_tflops"); b[who, k] = val($0, "bwd_tflops")
  if (who == "ftmpi") order[++n] = k }
END {
  # own kernels against FA2 (both mma.sync flash attention); the cuDNN path against the
  # cuDNN backend of SDPA (the same library)
  printf "%-4s %-6s | %-47s | %-47s\n", "", "", "forward TFLOP/s", "backward TFLOP/s"
  printf "%-4s %-6s | %7s %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s %7s\n", "hd", "seq",
         "own", "FA2", "own/FA2", "path", "cuDNN", "p/cuDNN",
         "own", "FA2", "own/FA2", "path", "cuDNN", "p/cuDNN"
  for (i = 1; i <= n; i++) {
    k = order[i]; split(k, p, ":")
    printf "%-4s %-6s | %7s %7s %7s %7s %7s %7s | %7s %7s %7s %7s %7s %7s\n", p[1], p[2],
           show(f["ftmpi", k]), show(f["fa2", k]), ratio(f["ftmpi", k], f["fa2", k]),
           show(f["ftcudnn", k]), show(f["cudnn", k]), ratio(f["ftcudnn", k], f["cudnn", k]),
           show(b["ftmpi", k]), show(b["fa2", k]), ratio(b["ftmpi", k], b["fa2", k]),
           show(b["ftcudnn", k]), show(b["cudnn", k]), ratio(b["ftcudnn", k], b["cudnn", k])
  }
  print "own: the tensor-core kernels of ftmpi; path: the cuDNN path of ftmpi (- where it declined)"
}' "$work/times"

printf "\n%-4s %-6s %-8s %-8s %10s %10s\n" hd seq window doc_len "fwd TF/s" "bwd TF/s"
for case in "128 16384 4096 0" "128 16384 0 1024" "64 16384 4096 2048"; do
    # shellcheck disable=SC2086 # split the case into its four numbers
    set -- $case
    ours=$("$bench" "$1" "$2" 1 $((2048 / $1)) "$3" "$4")
    f=$(echo "$ours" | sed -n 's/.*fwd_tflops=\([0-9.]*\).*/\1/p')
    b=$(echo "$ours" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p')
    printf "%-4s %-6s %-8s %-8s %10s %10s\n" "$1" "$2" "$3" "$4" "$f" "$b"
done

# TF/s of one run of the timing program (its arguments), forward or backward
fwd_tflops() { "$bench" "$@" | sed -n 's/.*fwd_tflops=\([0-9.]*\).*/\1/p'; }
bwd_tflops() { "$bench" "$@" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p'; }
# the backward in the shared layout, marked * where the device ran the 128-key block instead
shared_tflops() {
    r=$(FTMPI_TC_BWD_LAYOUT=shared "$bench" "$@")
    v=$(echo "$r" | sed -n 's/.*bwd_tflops=\([0-9.]*\).*/\1/p')
    case $r in *bwd_layout=shared*) echo "$v" ;; *) echo "$v*" ;; esac
}

# the forward (fwd) or backward (bwd) on Hopper's wgmma, marked * where the device or the
# build does not take it
wgmma_tflops() {
    pass=$1
    shift
    r=$(FTMPI_TC_FWD_WGMMA=1 FTMPI_TC_BWD_WGMMA=1 "$bench" "$@")
    v=$(echo "$r" | sed -n "s/.*${pass}_tflops=\([0-9.]*\).*/\1/p")
    case $r in *${pass}_mma=wgmma*) echo "$v" ;; *) echo "$v*" ;; esac
}

# The own kernels' tile switches (cuda_attention_tc*.cu), each beside its default: which
# one the default should be is this measurement's to decide. The forward at head_dim 128
# with 16 query rows per warp instead of 32 (FTMPI_TC_FWD_ROWS=16) or with 32-key tiles
# instead of 64 (FTMPI_TC_FWD_KEYS=32: fragments loaded a k-step ahead), at head_dim 64
# with 128-key tiles (FTMPI_TC_FWD_KEYS=128, FlashAttention-2's tile there); at both, the
# forward on Hopper's warpgroup MMA (FTMPI_TC_FWD_WGMMA=1, cuda_attention_wgmma.cu).
printf "\nown forward, TF/s: %20s %10s %10s %10s %20s %10s %10s\n" "hd 128, default" \
    "16 rows" "32 keys" "wgmma" "hd 64, default" "128 keys" "wgmma"
for seq in 1024 4096 16384; do
    set -- $seq $((16384 / seq))
    r32=$(fwd_tflops 128 "$@" 16)
    r16=$(FTMPI_TC_FWD_ROWS=16 fwd_tflops 128 "$@" 16)
    k32=$(FTMPI_TC_FWD_KEYS=32 fwd_tflops 128 "$@" 16)
    w128=$(wgmma_tflops fwd 128 "$@" 16)
    k64=$(fwd_tflops 64 "$@" 32)
    k128=$(FTMPI_TC_FWD_KEYS=128 fwd_tflops 64 "$@" 32)
    w64=$(wgmma_tflops fwd 64 "$@" 32)
    printf "  seq %-6s %26s %10s %10s %10s %20s %10s %10s\n" "$seq" "$r32" "$r16" "$k32" \
        "$w128" "$k64" "$k128" "$w64"
done
echo "  (*: this device or build does not take the wgmma forward: the default ran)"
# head_dim 256 (GPT-J: cuDNN does not take it, the own kernels always run)
printf "own forward, hd 256, TF/s: %14s %10s\n" "default" "wgmma"
for seq in 1024 4096 16384; do
    set -- $seq $((16384 / seq))
    printf "  seq %-6s %26s %10s\n" "$seq" "$(fwd_tflops 256 "$@" 8)" "$(wgmma_tflops fwd 256 "$@" 8)"
done

# The backward: two deterministic passes (the default) against the one-pass backward
# that sums dQ with atomics (FTMPI_ATTENTION_NONDETERMINISTIC=1, as FlashAttention-2), each
# with the dK/dV pass's three blocks: 64 keys and 4 warps (the default), 128 keys and 8
# warps of the same layout (FTMPI_TC_BWD_KEYS=128), and FlashAttention-2's layout with P
# and dS through shared memory (FTMPI_TC_BWD_LAYOUT=shared); and the two passes on
# Hopper's warpgroup MMA (FTMPI_TC_BWD_WGMMA=1, cuda_attention_wgmma_bwd.cu), TF/s.
printf "\nown backward, causal: %9s %9s %9s %9s %9s %9s %9s\n" "2 passes" "1 pass" "2p 128k" \
    "1p 128k" "2p shared" "1p shared" "2p wgmma"
for hd in 64 128; do
    for seq in 1024 4096 16384; do
        set -- $hd $seq $((16384 / seq)) $((2048 / hd))
        b2=$(bwd_tflops "$@")
        b1=$(FTMPI_ATTENTION_NONDETERMINISTIC=1 bwd_tflops "$@")
        w2=$(FTMPI_TC_BWD_KEYS=128 bwd_tflops "$@")
        w1=$(FTMPI_TC_BWD_KEYS=128 FTMPI_ATTENTION_NONDETERMINISTIC=1 bwd_tflops "$@")
        s2=$(shared_tflops "$@")
        s1=$(FTMPI_ATTENTION_NONDETERMINISTIC=1 shared_tflops "$@")
        g2=$(wgmma_tflops bwd "$@")
        printf "  hd %-4s seq %-6s %9s %9s %9s %9s %9s %9s %9s\n" "$hd" "$seq" "$b2" "$b1" "$w2" \
            "$w1" "$s2" "$s1" "$g2"
    done
done
echo "  (*: this device's shared memory does not take the shared layout's block: the 128-key one"
echo "   ran; for wgmma: this device or build does not take it, the default ran)"
