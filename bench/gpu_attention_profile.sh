#!/bin/sh
# Why ftmpi's own tensor-core attention kernels run at 0.4-0.7x FlashAttention-2 on the
# same card (doc/benchmarks.md, GPU): Nsight Compute's diagnostic sections for one launch
# of each kernel, the forward and the backward's dK/dV and dQ passes, at head_dim 64 and
# 128 (or the ones given), seq 4096, causal, 16k tokens (attention_tc_bench's shapes):
# speed of light (SM, tensor pipe and memory throughput), occupancy and what limits it,
# registers and local-memory spills (launch statistics), warp stall reasons, and
# shared-memory wavefronts and bank conflicts (the memory tables); and, with the
# SourceCounters section, warp-state sampling per SASS instruction: which instructions
# the warps stall on and why (ldmatrix, the MMA chains, MUFU exp2, barriers, cp.async
# waits...), since the kernel-wide stall totals say only that the kernels are
# latency-bound, not where. Kernel time alone is bench/gpu_attention.sh's; this says
# where inside a kernel the time goes.
#   bench/gpu_attention_profile.sh [HEAD_DIM ...]        (default: 64 128)
# Needs a --with-cuda build (build/ or $FTMPI_BUILD) and ncu (on PATH or under
# /opt/nvidia/nsight-compute); builds bench/attention_tc_bench there if it is missing.
# Writes to $OUT (or gpu-attention-profile/), per kernel: the report (hdN-KERNEL.ncu-rep,
# for ncu --import or the GUI), its details page (.txt), its SASS source page as CSV
# (-sass.csv: per-instruction samples and stall reasons); prints the sections' headline
# rows, then bench/ncu_sass_hot.py's summary of the CSV (the hottest instructions and
# the samples by opcode). The exit status is that of the profiling runs and their
# details pages only: a per-instruction summary that fails says so and costs nothing
# else, the report keeping its data. About a minute on an H100 without the per-instruction
# sampling (whose replay passes add an unmeasured share). Prints "no GPU" and exits 77 on
# a machine without one.
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
# an unknown one would fail the whole run). SourceCounters samples the warps' state per
# instruction (and counts per-instruction executions and memory traffic): a few more
# replay passes.
want="SpeedOfLight ComputeWorkloadAnalysis Occupancy LaunchStats WarpStateStats SchedulerStats MemoryWorkloadAnalysis_Tables SourceCounters"
have=$("$ncu" --list-sections 2>/dev/null)
sections=
for s in $want; do
    echo "$have" | grep -qw "$s" && sections="$sections --section $s"
done
[ -n "$sections" ] || { echo "gpu_attention_profile: ncu lists none of: $want"; exit 1; }

# The kernels the switches select: the mma.sync ones, or with FTMPI_TC_FWD_WGMMA=1 /
# FTMPI_TC_BWD_WGMMA=1 the forward / backward on Hopper's warpgroup MMA (the other switches,
# FTMPI_TC_*, reach attention_tc_bench through the environment as they are).
kernels="attn_fwd_tc_kernel tc_bwd_dkdv_kernel tc_bwd_dq_kernel"
[ "${FTMPI_TC_FWD_WGMMA:-}" = 1 ] && kernels=$(echo "$kernels" | sed 's/attn_fwd_tc_kernel/attn_fwd_wgmma_kernel/')
[ "${FTMPI_TC_BWD_WGMMA:-}" = 1 ] && kernels=$(echo "$kernels" | sed 's/tc_bwd_/wg_bwd_/g')
status=0
for hd in $dims; do
    for kernel in $kernels; do
        name=hd$hd-$kernel
        # the second launch of the kernel: the first pays for the module's loading. Into a
        # report (its extension named: a newer ncu would otherwise write .ncu-repz), printed
        # from it after: one profiling run gives both the details and the source page.
        rep=$logs/$name.ncu-rep
        # shellcheck disable=SC2086 # the section options split into words
        "$ncu" --clock-control none --kernel-name "regex:$kernel" --launch-skip 1 \
            --launch-count 1 $sections --import-source no --force-overwrite --export "$rep" \
            "$bench" "$hd" 4096 > "$logs/$name.log" 2>&1 ||
            { echo "== $name: ncu failed ($logs/$name.log)"; tail -n 5 "$logs/$name.log"; status=1; continue; }
        # (a filter that matched no launch leaves no report: that fails here)
        "$ncu" --import "$rep" --page details > "$logs/$name.txt" 2>&1 ||
            { echo "== $name: no report ($logs/$name.log)"; tail -n 5 "$logs/$name.log" "$logs/$name.txt"; status=1; continue; }
        echo "== $name"
        grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Block Limit (Registers|Shared Mem)|Dynamic Shared Memory|Local Memory Spilling|Issue Slots Busy|Executed Ipc Active|No Eligible|Warp Cycles Per Issued|stall|bank|Shared (Load|Store)|Local (Load|Store)" \
            -i "$logs/$name.txt" | sed 's/  */ /g' | cut -c1-200 | head -n 40
        # Per SASS instruction: the source page (SASS view, numbers in base units) as CSV,
        # summed by instruction and by opcode. Only with SourceCounters, which samples them.
        case $sections in
        *SourceCounters*) ;;
        *) echo "-- (no SourceCounters section in this ncu: no per-instruction samples)"; continue ;;
        esac
        csv=$logs/$name-sass.csv
        echo "-- warp samples by SASS instruction ($csv)"
        if "$ncu" --import "$rep" --page source --csv --print-source sass --print-units base \
                > "$csv" 2> "$logs/$name-sass.log"; then
            python3 "$top/bench/ncu_sass_hot.py" "$csv" 15 ||
                echo "-- $name: no per-instruction summary (the report has the data: $rep)"
        else
            echo "-- $name: ncu could not print the source page ($logs/$name-sass.log):"
            tail -n 3 "$logs/$name-sass.log"
        fi
    done
done
exit $status
