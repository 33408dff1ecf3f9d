"""PyTorch's scaled_dot_product_attention (bf16, causal), timed like
bench/attention_tc_bench.c, for each of SDPA's backends asked for, in one process:

  attention_sdpa.py [--backends cudnn,flash] [--device cuda|cpu] HD:SEQ:BATCH:HEADS ...

prints one line per backend and shape,
  sdpa backend=.. hd=.. seq=.. fwd_ms=.. fwd_tflops=.. bwd_ms=.. bwd_tflops=..
or `sdpa backend=.. hd=.. seq=.. unavailable (reason)` where that backend does not take the
shape on this machine. Backends: cudnn (SDPA's default on Hopper), flash (FlashAttention-2),
efficient, math, default (SDPA's own choice). FLOPs are FlashAttention's convention, as in
attention_tc_bench.c: forward 4 D per visible pair (T^2 / 2 causal), backward 2.5x.
--device cpu exists to check this script without a GPU (use tiny shapes and math).
A reference peer for bench/gpu_attention.sh, never a dependency of ftmpi."""
import argparse
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
    "default": None,
}


def parse_shape(text):
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"shape '{text}': expected HD:SEQ:BATCH:HEADS, positive integers")
    return tuple(int(p) for p in parts)


def parse_backends(text):
    names = text.split(",")
    for n in names:
        if n not in BACKENDS:
            raise argparse.ArgumentTypeError(f"backend '{n}': expected one of {', '.join(BACKENDS)}")
    return names


class Timer:
    """CUDA events on a GPU, the wall clock on the CPU; milliseconds per repetition."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def __call__(self, fn, reps):
        if self.cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            stop.record()
            torch.cuda.synchronize()
            return start.elapsed_time(stop) / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / reps


def time_shape(backend, shape, device, reps):
    hd, seq, batch, heads = shape
    q, k, v = (torch.randn((batch, heads, seq, hd), device=device, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    timer = Timer(device)
    ctx = sdpa_kernel([BACKENDS[backend]]) if BACKENDS[backend] is not None else torch.enable_grad()
    with ctx:
        fwd = bwd = 0.0
        for _ in range(2):  # the first pass warms up (kernel selection, workspace)
            fwd = timer(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            grad = torch.randn_like(out)
            bwd = timer(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), reps)
    flops = 4.0 * batch * heads * seq * seq * hd / 2.0
    return fwd, flops / fwd / 1e9, bwd, 2.5 * flops / bwd / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", type=parse_backends, default=["cudnn", "flash"])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("shapes", type=parse_shape, nargs="+", metavar="HD:SEQ:BATCH:HEADS")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no GPU")
        sys.exit(77)
    for backend in args.backends:
        for shape in args.shapes:
            tag = f"sdpa backend={backend} hd={shape[0]} seq={shape[1]}"
            try:
                fwd, ftf, bwd, btf = time_shape(backend, shape, args.device, args.reps)
            except RuntimeError as e:  # the backend does not take this shape or device
                print(f"{tag} unavailable ({str(e).splitlines()[0][:120]})", flush=True)
                continue
            print(f"{tag} fwd_ms={fwd:.3f} fwd_tflops={ftf:.1f} bwd_ms={bwd:.3f} bwd_tflops={btf:.1f}",
                  flush=True)
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
