"""PyTorch's scaled_dot_product_attention (bf16, causal) timed like
bench/attention_tc_bench.c: one line per call,
sdpa hd=.. seq=.. fwd_ms=.. fwd_tflops=.. bwd_ms=.. bwd_tflops=..
Usage: attention_sdpa.py HEAD_DIM SEQ BATCH HEADS (a reference peer, never a dependency)."""
import sys

import torch
import torch.nn.functional as F


def main():
    hd, seq, batch, heads = (int(x) for x in sys.argv[1:5])
    if not torch.cuda.is_available():
        print("no GPU")
        sys.exit(77)
    shape = (batch, heads, seq, hd)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    reps = 10
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):  # the first pass warms up
        start.record()
        for _ in range(reps):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        stop.record()
        torch.cuda.synchronize()
        fwd = start.elapsed_time(stop) / reps
        grad = torch.randn_like(out)
        start.record()
        for _ in range(reps):
            torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
        stop.record()
        torch.cuda.synchronize()
        bwd = start.elapsed_time(stop) / reps
    flops = 4.0 * batch * heads * seq * seq * hd / 2.0
    print(f"sdpa hd={hd} seq={seq} fwd_ms={fwd:.3f} fwd_tflops={flops / fwd / 1e9:.1f} "
          f"bwd_ms={bwd:.3f} bwd_tflops={2.5 * flops / bwd / 1e9:.1f}")


if __name__ == "__main__":
    main()
