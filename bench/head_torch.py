#!/usr/bin/env python3
"""PyTorch's plain LM head + cross-entropy (what HF's LlamaForCausalLM does under bf16):
logits = x @ W^T in the model dtype, upcast to fp32, mean cross-entropy, backward for x
and W. One chunk, no fusion. Prints head_ms (best of --reps) and, on CUDA, the transient
memory the step allocated beyond its inputs. Reference tool for bench/head.sh only."""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu")
ap.add_argument("--tokens", type=int, default=1024)
ap.add_argument("--hidden", type=int, default=1024)
ap.add_argument("--vocab", type=int, default=32000)
ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--threads", type=int, default=0)
a = ap.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
dev = torch.device(a.device)
g = torch.Generator().manual_seed(1)
x = (0.02 * torch.randn(a.tokens, a.hidden, generator=g)).to(dev, dt).requires_grad_()
w = (0.02 * torch.randn(a.vocab, a.hidden, generator=g)).to(dev, dt).requires_grad_()
t = torch.randint(0, a.vocab, (a.tokens,), generator=g).to(dev)


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


best, transient = float("inf"), 0.0
for r in range(a.reps + 1):
    x.grad = w.grad = None
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    loss = torch.nn.functional.cross_entropy((x @ w.t()).float(), t)
    loss.backward()
    sync()
    dt_s = time.perf_counter() - t0
    if dev.type == "cuda":
        # the gradients of x and W stay: count only what the step needed beyond them
        grads = x.grad.numel() * x.grad.element_size() + w.grad.numel() * w.grad.element_size()
        transient = (torch.cuda.max_memory_allocated() - base - grads) / 2**20
    if r > 0:
        best = min(best, dt_s)
flops = 6.0 * a.tokens * a.vocab * a.hidden
print(f"head_ms={1e3 * best:.3f} tflops={flops / best / 1e12:.2f} transient_mib={transient:.1f}")
