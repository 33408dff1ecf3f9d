#!/bin/sh
# Why ftmpi's own tensor-core attention kernels run at 0.4-0.7x FlashAttention-2 on the
# same card (doc/benchmarks.md, GPU): Nsight Compute's diagnostic sections for one launch
# of each kernel, the forward and the backward's dK/dV and dQ passes, at head_dim 64 and
# 128 (or the ones given), seq 4096, causal, 16k tokens (attention_tc_bench's shapes):
# speed of light (SM, tensor pipe and memory throughput), occupancy and what limits it,
# registers and local-memory spills (launch statistics), warp stall reasons, and
# shared-memory wavefronts and bank conflicts (the memory tables). Kernel time alone is
# bench/gpu_attention.sh's; this says where inside a kernel the time goes.
#   bench/gpu_attention_profile.sh [HEAD_DIM ...]        (default: 64 128)
# Needs a --with-cuda build (build/ or $FTMPI_BUILD) and ncu (on PATH or under
# /opt/nvidia/nsight-compute); builds bench/attention_tc_bench there if it is missing.
# Writes one report per kernel to $OUT (or gpu-attention-profile/) and prints the
# sections' headline rows. About a minute on an H100. Prints "no GPU" and exits 77 on a
# machine without one.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
dims=${*:-64 128}
for hd in $dims; do
    case $hd in ''|*[!0-9]*|0) echo "gpu_attention_profile: HEAD_DIM=$hd: expected a positive head dimension" >&2; exit 2;; esac
done
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
build=$(cd "${FTMPI_BUILD:-$top/build}" 2>/dev/null && pwd) ||
    { echo "gpu_attention_profile: no build directory ${FTMPI_BUILD:-$top/build}" >&2; exit 1; }
grep -q "FT_CUDA_EMULATION 1" "$build/config.h" &&
    { echo "gpu_attention_profile: $build is the CPU harness build"; exit 1; }
bench=$build/bench/attention_tc_bench
[ -x "$bench" ] || make -C "$build" bench/attention_tc_bench >/dev/null ||
    { echo "gpu_attention_profile: cannot build $bench"; exit 1; }
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1) ||
    true
[ -n "$ncu" ] || { echo "gpu_attention_profile: no ncu (Nsight Compute) on this machine"; exit 1; }
logs=${OUT:-gpu-attention-profile}
mkdir -p "$logs" || exit 1

# The sections this ncu has of the ones wanted (names differ little across versions, but
# an unknown one would fail the whole run).
want="SpeedOfLight ComputeWorkloadAnalysis Occupancy LaunchStats WarpStateStats SchedulerStats MemoryWorkloadAnalysis_Tables"
have=$("$ncu" --list-sections 2>/dev/null)
sections=
for s in $want; do
    echo "$have" | grep -qw "$s" && sections="$sections --section $s"
done
[ -n "$sections" ] || { echo "gpu_attention_profile: ncu lists none of: $want"; exit 1; }

status=0
for hd in $dims; do
    for kernel in attn_fwd_tc_kernel tc_bwd_dkdv_kernel tc_bwd_dq_kernel; do
        name=hd$hd-$kernel
        # the second launch of the kernel: the first pays for the module's loading
        # shellcheck disable=SC2086 # the section options split into words
        "$ncu" --clock-control none --kernel-name "regex:$kernel" --launch-skip 1 \
            --launch-count 1 $sections "$bench" "$hd" 4096 > "$logs/$name.txt" 2>&1 ||
            { echo "== $name: ncu failed ($logs/$name.txt)"; tail -n 5 "$logs/$name.txt"; status=1; continue; }
        echo "== $name"
        grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Block Limit (Registers|Shared Mem)|Dynamic Shared Memory|Local Memory Spilling|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued|stall|bank|Shared (Load|Store)|Local (Load|Store)" \
            -i "$logs/$name.txt" | sed 's/  */ /g' | cut -c1-200 | head -n 40
    done
done
exit $status
