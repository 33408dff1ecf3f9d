#!/bin/sh
# How much of a training step the GPU spends idle between operations, and before which:
# ftmpi's bf16 step (Llama-3.2-1B's shape with its layers cut to LAYERS, default 16: the
# whole model; seq 4096, batch 1, activation checkpointing, AdamW; bench/gpu_step_cfg.sh)
# run STEPS times (default 4) with CUPTI recording every kernel, copy and set on the
# device's clock (bench/cupti_timeline.c, built here against this machine's CUPTI), then
# bench/gpu_timeline.py on the steps after the first. A kernel-time profile
# (bench/gpu_profile.sh: ncu serialises kernels) cannot see this time.
#   bench/gpu_timeline.sh [LAYERS] [ftmpi KEY=VALUE ...]
# (needs a --with-cuda build in build/ or $FTMPI_BUILD, a C compiler, CUPTI's library and
# headers, and h5py.) Prints "no GPU" and exits 77 on a machine without one.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
layers=${1:-16}
[ $# -gt 0 ] && shift
case $layers in ''|*[!0-9]*|0) echo "gpu_timeline: LAYERS=$layers: expected a positive layer count" >&2; exit 2;; esac
STEPS=${STEPS:-4}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
. "$top/bench/gpu_env.sh"
ft_gpu_build gpu_timeline || exit 1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
# CUPTI: the toolkit's, else the copy a Python package carries (headers and library)
inc= lib=
for d in /usr/local/cuda/extras/CUPTI /usr/local/cuda \
         $(python3 -c 'import nvidia.cuda_cupti, os; print(os.path.dirname(nvidia.cuda_cupti.__file__))' 2>/dev/null || true); do
    [ -z "$inc" ] && [ -f "$d/include/cupti.h" ] && inc=$d/include
    [ -z "$lib" ] && for l in "$d/lib64" "$d/lib"; do ls "$l"/libcupti.so* >/dev/null 2>&1 && lib=$l && break; done
done
[ -n "$inc" ] && [ -n "$lib" ] || { echo "gpu_timeline: no CUPTI headers and library (include '$inc', lib '$lib')"; exit 1; }
cudainc=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../include
cupti_so=$(ls "$lib"/libcupti.so* | head -n 1)
cc -std=c11 -D_GNU_SOURCE -O2 -shared -fPIC -I"$inc" -I"$cudainc" "$top/bench/cupti_timeline.c" \
    -o libcupti_timeline.so "$cupti_so" -lpthread ||
    { echo "gpu_timeline: could not build the CUPTI library"; exit 1; }
. "$top/bench/gpu_step_cfg.sh"
ft_step_setup "$layers" "$STEPS" || { echo "gpu_timeline: no step to run"; exit 1; }
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
CUDA_INJECTION64_PATH="$work/libcupti_timeline.so" FTMPI_TIMELINE="$work/timeline.tsv" \
    "$build/ftmpi" step.cfg "$@" > ftmpi.log 2>&1 ||
    { tail -n 20 ftmpi.log; echo "gpu_timeline: ftmpi failed"; exit 1; }
grep '^step\|cupti_timeline' ftmpi.log | tail -n 3
[ -s timeline.tsv ] || { echo "gpu_timeline: CUPTI recorded nothing"; exit 1; }
python3 "$top/bench/gpu_timeline.py" timeline.tsv
[ -n "${OUT:-}" ] && gzip -c timeline.tsv > "$OUT/timeline.tsv.gz" || true
