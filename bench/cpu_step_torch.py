#!/usr/bin/env python3
"""PyTorch peer for ftmpi's CPU training-step benchmark.

Times one training step (forward + backward + AdamW step + zero_grad) of a randomly
initialised Hugging Face LlamaForCausalLM on the CPU, with SDPA attention
(transformers' default) and random tokens, using torch.set_num_threads(--threads).
--dtype fp32 (default) trains in fp32; --dtype bf16 is the mixed-precision recipe
ftmpi's precision = "bf16" implements: the model computes in bf16 from the bf16
rounding of fp32 master weights, and AdamW updates the masters from the widened bf16
gradients (the copy in and out is part of the timed step, as in any such recipe).

Prints a few human-readable lines and then ONE machine-readable line, e.g.

    torch_step_ms=1234.5 tokens_per_s=830.1 params=12345678 threads=2 layers=6 ...

torch_step_ms is the median over --steps timed steps (after --warmup untimed ones);
tokens_per_s = batch * seq / median step time; min/mean are on the same line.
"""

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Time a fp32 CPU training step (fwd+bwd+AdamW) of HF LlamaForCausalLM.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--layers", type=int, default=6, help="num_hidden_layers")
    ap.add_argument("--dim", type=int, default=512, help="hidden_size")
    ap.add_argument("--heads", type=int, default=8, help="num_attention_heads")
    ap.add_argument("--kv-heads", type=int, default=4, help="num_key_value_heads")
    ap.add_argument("--ffn", type=int, default=1376, help="intermediate_size")
    ap.add_argument("--vocab", type=int, default=8192, help="vocab_size")
    ap.add_argument("--seq", type=int, default=256, help="sequence length T")
    ap.add_argument("--batch", type=int, default=4, help="rows per step")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed warm-up steps")
    ap.add_argument("--tied", action="store_true", help="tie_word_embeddings")
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"],
                    help="attention implementation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                    help="fp32, or bf16 with fp32 master weights")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # Set OpenMP/MKL thread counts before torch initialises its pools.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    transformers.logging.set_verbosity_error()
    if args.dim % args.heads or args.heads % args.kv_heads:
        sys.exit("dim must be divisible by heads, heads by kv-heads")

    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.dim,
                      intermediate_size=args.ffn, num_hidden_layers=args.layers,
                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                      head_dim=args.dim // args.heads,
                      max_position_embeddings=max(args.seq, 2048), rms_norm_eps=1e-5,
                      rope_theta=10000.0, tie_word_embeddings=args.tied,
                      attention_dropout=0.0, use_cache=False)
    model = LlamaForCausalLM._from_config(cfg, attn_implementation=args.attn).float()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())  # tied weights counted once

    params = dict(model.named_parameters())
    bf16 = args.dtype == "bf16"
    # the optimizer's parameters: the model's own (fp32), or fp32 masters of a bf16 model
    master = ({n: p.detach().clone().float().requires_grad_(True) for n, p in params.items()}
              if bf16 else params)
    if bf16:
        model.to(torch.bfloat16)
        params = dict(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [master[n] for n in params if params[n].ndim == 2], "weight_decay": 0.1},
         {"params": [master[n] for n in params if params[n].ndim != 2], "weight_decay": 0.0}],
        lr=1e-4, betas=(0.9, 0.95), eps=1e-8)

    g = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=g)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, args.vocab),
                                                 labels.reshape(-1))
        loss.backward()
        if bf16:
            for n, p in params.items():
                master[n].grad = p.grad.float()
                p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        if bf16:
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(master[n])
        return loss.item()

    print("torch %s, transformers %s, threads %d (interop %d), attn %s, params %d"
          % (torch.__version__, transformers.__version__, torch.get_num_threads(),
             torch.get_num_interop_threads(), model.config._attn_implementation, n_params))
    for _ in range(args.warmup):
        step()
    times, loss = [], float("nan")
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    ntok = args.batch * args.seq
    print("step ms: " + " ".join("%.1f" % t for t in times))
    print("torch_step_ms=%.2f tokens_per_s=%.1f step_ms_min=%.2f step_ms_mean=%.2f params=%d "
          "threads=%d layers=%d dim=%d heads=%d kv_heads=%d ffn=%d vocab=%d seq=%d batch=%d "
          "steps=%d warmup=%d attn=%s dtype=%s loss=%.4f"
          % (med, ntok / (med / 1e3), min(times), statistics.fmean(times), n_params,
             args.threads, args.layers, args.dim, args.heads, args.kv_heads, args.ffn,
             args.vocab, args.seq, args.batch, args.steps, args.warmup,
             model.config._attn_implementation, args.dtype, loss))
    return 0


if __name__ == "__main__":
    sys.exit(main())
