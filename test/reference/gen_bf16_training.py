#!/usr/bin/env python3
"""Reference trajectories for the bf16 mixed-precision recipe: 60 AdamW steps of a tiny
Llama in PyTorch, in fp32 and in bf16 with an fp32 master copy.

Writes test/data/hf/hf_bf16_train.h5, an ftmpi weights file (the initial fp32 weights,
/config) with the training batch in /batch (dataset-row form, as gen_hf_reference.py)
and per-step losses in /expected/train:

  loss_fp32        HF LlamaForCausalLM in fp32, eager attention
  loss_bf16        the recipe: the model's parameters are the bf16 rounding of an fp32
                   master, forward and backward run in bf16 (HF computes RMSNorm and
                   softmax in fp32 internally and rounds their outputs), the loss on
                   fp32 logits, the bf16 gradients widened to fp32, clipped, and AdamW
                   updates the fp32 master
  loss_bf16_sdpa   the same recipe with PyTorch's SDPA attention instead of eager
  loss_bf16_accum  the same recipe accumulating 4 micro-batches of 32 rows
                   The three bf16 runs are equally valid implementations of the recipe;
                   their spread measures how far correct bf16 runs drift apart on this
                   problem, which is what the C test's tolerance is scaled by

Every step trains on the same 128 rows (one global batch of one epoch, so the order
ftmpi draws rows in does not matter), drawn from a random Markov chain (make_batch):
a smooth problem, where trajectories computed with different roundings stay close (a
task the model "discovers" suddenly amplifies rounding into percent-level differences
between equally valid runs). Constant lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on 2-D
parameters only, global-norm clipping at 1.0 (torch.nn.utils.clip_grad_norm_ on the
fp32 gradients), as ftmpi does.

    python3 test/reference/gen_bf16_training.py [--out test/data/hf]
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from gen_hf_reference import create_weights_file, sattr, sha256  # noqa: E402

GENERATOR = "gen_bf16_training.py"
SEED = 2001
SHAPE = dict(vocab_size=97, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
             max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
THETA = 10000.0
B, T = 128, 32
STEPS = 60
OPT = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0)


def build(attn):
    cfg = LlamaConfig(**SHAPE, rope_theta=THETA, tie_word_embeddings=False, attention_dropout=0.0,
                      hidden_act="silu", use_cache=False, attention_bias=False, mlp_bias=False,
                      pretraining_tp=1)
    model = LlamaForCausalLM._from_config(cfg, attn_implementation=attn)
    assert model.config._attn_implementation == attn
    return model.float().eval()


def initial_weights():
    """N(0, 0.02) matrices, 1 + 0.1 N(0, 1) norms, from a seeded generator."""
    model = build("eager")
    g = torch.Generator().manual_seed(SEED)
    init = {}
    for name, p in model.named_parameters():
        if p.ndim == 2:
            init[name] = torch.randn(p.shape, generator=g) * 0.02
        else:
            init[name] = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
    return init, g


def make_batch(g):
    """Rows of a random first-order Markov chain: each token has 4 possible successors
    with probabilities 0.55, 0.25, 0.15, 0.05. Learning it is a smooth descent toward
    the chain's entropy (~1.1 nats), not a phase change that amplifies rounding."""
    V = SHAPE["vocab_size"]
    succ = torch.randint(3, V, (V, 4), generator=g)
    probs = torch.tensor([0.55, 0.25, 0.15, 0.05])
    tokens = torch.empty((B, T + 1), dtype=torch.int64)
    tokens[:, 0] = torch.randint(3, V, (B,), generator=g)
    for j in range(1, T + 1):
        pick = torch.multinomial(probs, B, replacement=True, generator=g)
        tokens[:, j] = succ[tokens[:, j - 1], pick]
    mask = torch.ones((B, T + 1), dtype=torch.uint8)
    mask[:, 0] = 0
    segment = torch.zeros((B, T + 1), dtype=torch.int32)
    return tokens, mask, segment


def mean_loss(logits, tokens):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def train(init, tokens, attn, dtype, micro=B):
    """Losses of STEPS steps; the model computes in dtype, AdamW keeps an fp32 master.
    micro < B accumulates B / micro micro-batches (their bf16 gradients summed in fp32)."""
    model = build(attn).to(dtype)
    params = dict(model.named_parameters())
    master = {n: init[n].clone().requires_grad_(True) for n in params}
    decay = [master[n] for n in params if params[n].ndim == 2]
    no_decay = [master[n] for n in params if params[n].ndim != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": OPT["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"],
                            foreach=False)
    pos = torch.arange(T).unsqueeze(0).expand(B, T)
    losses = []
    for _ in range(STEPS):
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(master[n].detach().to(dtype))  # round to nearest even
        total = 0.0
        for n in params:
            master[n].grad = torch.zeros_like(master[n])
        for r0 in range(0, B, micro):
            rows = slice(r0, r0 + micro)
            model.zero_grad(set_to_none=True)
            loss = mean_loss(model(input_ids=tokens[rows, :T], position_ids=pos[rows]).logits,
                             tokens[rows]) * (micro / B)
            loss.backward()
            total += loss.item()
            for n, p in params.items():
                master[n].grad += p.grad.detach().float()
        torch.nn.utils.clip_grad_norm_(list(master.values()), OPT["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
    return np.array(losses)


def write_base(f, init, tokens, mask, segment):
    """/config, /model (the initial fp32 weights) and /batch of a training golden."""
    kw = dict(track_times=False)
    c = f.create_group("config")
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim",
              "max_position_embeddings", "bos_token_id", "eos_token_id"):
        c.attrs[k] = np.int32(SHAPE[k])
    c.attrs["rms_norm_eps"] = np.float64(SHAPE["rms_norm_eps"])
    c.attrs["rope_theta"] = np.float64(THETA)
    c.attrs["tie_word_embeddings"] = np.int32(0)
    c.attrs["rope_scaling_type"] = sattr("none")
    m = f.create_group("model")
    for n in sorted(init):
        m.create_dataset(n, data=init[n].numpy().astype("<f4"), **kw)
    bg = f.create_group("batch")
    bg.create_dataset("tokens", data=tokens.numpy().astype("<u4"), **kw)
    bg.create_dataset("loss_mask", data=mask.numpy().astype("u1"), **kw)
    bg.create_dataset("segment", data=segment.numpy().astype("<i4"), **kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "hf"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)

    init, g = initial_weights()
    tokens, mask, segment = make_batch(g)
    fp32 = train(init, tokens, "eager", torch.float32)
    bf16 = train(init, tokens, "eager", torch.bfloat16)
    bf16_sdpa = train(init, tokens, "sdpa", torch.bfloat16)
    bf16_accum = train(init, tokens, "eager", torch.bfloat16, micro=B // 4)
    assert fp32[-1] < 0.6 * fp32[0] and bf16[-1] < 0.6 * bf16[0], (fp32, bf16)

    path = os.path.join(args.out, "hf_bf16_train.h5")
    kw = dict(track_times=False)
    with create_weights_file(path, GENERATOR, "hf_bf16_train", SEED) as f:
        write_base(f, init, tokens, mask, segment)
        tg = f.create_group("expected").create_group("train")
        for k, v in OPT.items():
            tg.attrs[k] = np.float64(v)
        tg.attrs["steps"] = np.int32(STEPS)
        tg.create_dataset("loss_fp32", data=fp32.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16", data=bf16.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16_sdpa", data=bf16_sdpa.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16_accum", data=bf16_accum.astype("<f8"), **kw)

    ens = np.stack([bf16, bf16_sdpa, bf16_accum])
    rel = (ens.max(0) - ens.min(0)) / ens.mean(0)
    print("fp32       %s" % " ".join("%.4f" % x for x in fp32[::6]))
    print("bf16       %s" % " ".join("%.4f" % x for x in bf16[::6]))
    print("bf16 sdpa  %s" % " ".join("%.4f" % x for x in bf16_sdpa[::6]))
    print("bf16 accum %s" % " ".join("%.4f" % x for x in bf16_accum[::6]))
    print("bf16 ensemble spread: max rel %.4f, final rel %.4f; bf16 vs fp32 final rel %.4f"
          % (rel.max(), rel[-1], abs(bf16[-1] - fp32[-1]) / fp32[-1]))
    print("%s %d B sha256=%s" % (path, os.path.getsize(path), sha256(path)[:16]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
