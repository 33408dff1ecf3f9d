#!/bin/sh
# Where a training step's GPU time goes: the kernels of ftmpi's bf16 step (Llama-3.2-1B's
# shape with its layers cut to LAYERS, default 2; seq 4096, batch 1, activation
# checkpointing, AdamW) timed one by one by Nsight Compute (ncu, gpu__time_duration,
# clocks left alone), summed per kernel over STEPS steps (default 3) and divided by them:
# one table by kind (GEMMs, attention, optimizer, norms, ...) and the 25 costliest
# kernels. Kernel time only: gaps between kernels (launch latency, host work, waits) are
# what the step's wall time has beyond the sum.
#   bench/gpu_profile.sh [LAYERS] [ftmpi KEY=VALUE ...]
# (needs a --with-cuda build in build/ or $FTMPI_BUILD, ncu on PATH or under
# /opt/nvidia/nsight-compute, and h5py for the data file that bench/gpu_step_torch.py
# writes.) Prints "no GPU" and exits 77 on a machine without one.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
layers=${1:-2}
[ $# -gt 0 ] && shift
case $layers in ''|*[!0-9]*|0) echo "gpu_profile: LAYERS=$layers: expected a positive layer count" >&2; exit 2;; esac
STEPS=${STEPS:-3}
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
. "$top/bench/gpu_env.sh"
ft_gpu_build gpu_profile || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1) ||
    true
[ -n "$ncu" ] || { echo "gpu_profile: no ncu (Nsight Compute) on this machine"; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
. "$top/bench/gpu_step_cfg.sh"
ft_step_setup "$layers" "$STEPS" || { echo "gpu_profile: no step to profile"; exit 1; }
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    --log-file kernels.csv "$build/ftmpi" step.cfg "$@" > ftmpi.log 2>&1 ||
    { tail -n 20 ftmpi.log; echo "gpu_profile: ncu or ftmpi failed"; exit 1; }
grep '^step' ftmpi.log | tail -n 1
python3 - "$STEPS" kernels.csv <<'PY'
import csv, re, sys
steps = int(sys.argv[1])
rows = list(csv.reader(open(sys.argv[2])))
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
cols = rows[head]
name_at, time_at = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum")
scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}
unit = 1e-6
per = {}
for r in rows[head + 1:]:
    if len(r) <= max(name_at, time_at):
        continue
    v = r[time_at].replace(",", "")
    if v in scale:  # the units row
        unit = scale[v]
        continue
    try:
        t = float(v) * unit
    except ValueError:
        continue
    per[r[name_at]] = per.get(r[name_at], 0.0) + t
# the start-up's kernels (random initial values made on the device) run once, not per
# step: reported apart, outside the step's total
startup = {n: t for n, t in per.items() if re.search(r"normal_fill|scatter_f32", n)}
for n in startup:
    del per[n]
# first match wins: cuDNN's generated attention kernels carry "sm90_" like the GEMMs
kinds = [("attention, cuDNN", r"cudnn|fmha|flash|sdpa|fprop|dgrad"),
         ("GEMM (cuBLASLt)", r"gemm|xmma|cutlass|sm90_|sm80_|nvjet"),
         ("attention, own", r"attention|attn|tc_"),
         ("LM head, cross-entropy", r"cross_entropy|logsumexp|head"),
         ("optimizer", r"adamw|sgd"),
         ("norms", r"norm"),
         ("rope", r"rope|rotary"),
         ("MLP activation", r"swiglu|gelu"),
         ("embedding", r"embedding"),
         ("casts, copies, sums", r"bf16|f32|copy|scale|add|sum|zero|memset")]
def kind(name):
    low = name.lower()
    for k, pat in kinds:
        if re.search(pat, low):
            return k
    return "other"
total = sum(per.values()) / steps
by = {}
for n, t in per.items():
    by[kind(n)] = by.get(kind(n), 0.0) + t / steps
print(f"kernel time per step: {total:.2f} ms ({len(per)} kernels)")
for k, t in sorted(by.items(), key=lambda x: -x[1]):
    print(f"  {k:<24} {t:9.2f} ms {100 * t / total:6.1f} %")
if startup:
    print(f"start-up kernels (once, not in the step): {sum(startup.values()):.2f} ms")
print("the 25 costliest kernels (ms per step):")
for n, t in sorted(per.items(), key=lambda x: -x[1])[:25]:
    print(f"  {t / steps:9.3f}  {n[:110]}")
PY
