#!/usr/bin/env python3
"""Reference trajectories for LoRA in the bf16 recipe: AdamW over PEFT rank-8 adapters on
every projection of a frozen tiny Llama, in fp32 and in three bf16 variants.

Writes test/data/hf/lora_bf16_train.h5: the base, batch and optimizer settings of
hf_bf16_train.h5 (gen_bf16_training.py, whose code this script imports: same seed, so
the same initial weights and 128 rows of a Markov chain), the /lora settings and the
initial adapters in /adapter (gen_peft_reference.py's layout and names, non-zero A and
B drawn after the batch), and per-step losses in /expected/train:

  loss_fp32             PEFT on the fp32 model, eager attention
  loss_bf16             ftmpi's recipe: the base in bf16 (rounded from fp32, frozen),
                        activations and residual in bf16, the adapters' working copies the
                        bf16 rounding of fp32 masters (PEFT with autocast_adapter_dtype
                        off, so A and B compute in bf16 like every other weight), their
                        bf16 gradients widened to fp32, clipped, fp32 AdamW on the masters
  loss_bf16_sdpa        the same with PyTorch's SDPA attention
  loss_bf16_fp32_adapters  PEFT's default on a bf16 model (autocast_adapter_dtype=True):
                        the adapters are fp32 parameters (their own masters), the LoRA
                        path runs in fp32 on the widened input and its sum with the bf16
                        projection is rounded once; AdamW on them directly

Why these, and not torch.autocast: ftmpi's bf16 recipe stores the base and the residual
stream in bf16 (doc/design.md, "Numerics") and keeps only the adapters' masters,
moments and gradients in fp32. A bf16 model is that; autocast would keep fp32 weights
and an fp32 residual, rounding only matmul operands, a different recipe. The three
variants store the same tensors in the same precisions and differ only in where they
round (the attention kernel; whether the small adapter path is bf16 or fp32), so their
spread measures how far equally valid runs of the recipe drift apart here, which the
C test's tolerance is scaled by.

    python3 test/reference/gen_lora_bf16_training.py [--out test/data/hf]
"""
import argparse
import os
import sys
import warnings

import numpy as np
import peft
import torch
import transformers
from peft import LoraConfig, get_peft_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_bf16_training as full  # noqa: E402
import gen_peft_reference as pref  # noqa: E402
from gen_hf_reference import create_weights_file, sattr, sha256  # noqa: E402

GENERATOR = "gen_lora_bf16_training.py"
CASE = "lora_bf16_train"
LORA = dict(rank=8, alpha=16.0, dropout=0.0)
TARGETS = pref.TARGETS["llama"]
STEPS = 50
# hf_bf16_train's optimizer but lr 5e-3 (LoRA's usual 1e-4 .. 2e-4 barely moves the loss in
# 50 steps, where bf16 and fp32 agree to 1e-5; 1e-2 turns noisy after ~25 steps, 3e-2
# diverges); weight decay on A and B (2-D, as HF decays them)
OPT = dict(full.OPT, lr=5e-3)


def peft_model(base_init, attn, dtype, fp32_adapters):
    """The frozen base (init rounded to dtype) wrapped by PEFT; fp32_adapters: PEFT's
    autocast_adapter_dtype (adapters upcast to fp32 on a bf16 model)."""
    model = full.build(attn).to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(base_init[n].to(dtype))
    cfg = LoraConfig(r=LORA["rank"], lora_alpha=LORA["alpha"], lora_dropout=LORA["dropout"],
                     target_modules=TARGETS, bias="none", task_type="CAUSAL_LM")
    pm = get_peft_model(model, cfg, autocast_adapter_dtype=fp32_adapters)
    pm.eval()  # dropout 0 anyway; eval keeps HF from any training-only path
    params = pref.lora_params(pm)
    want = torch.float32 if fp32_adapters or dtype == torch.float32 else dtype
    assert all(p.dtype == want for p in params.values()), {p.dtype for p in params.values()}
    assert {n for n, p in pm.named_parameters() if p.requires_grad} == set(params)
    return pm, params


def train(base_init, adapters, tokens, attn, dtype, fp32_adapters=False):
    """Per-step losses: STEPS AdamW steps over fp32 masters of the adapters, the
    working adapters the masters' rounding to their parameters' dtype."""
    pm, params = peft_model(base_init, attn, dtype, fp32_adapters)
    master = {n: adapters[n].clone().requires_grad_(True) for n in params}
    opt = torch.optim.AdamW(list(master.values()), lr=OPT["lr"],
                            betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"],
                            weight_decay=OPT["weight_decay"], foreach=False)
    B, T = tokens.shape[0], tokens.shape[1] - 1
    pos = torch.arange(T).unsqueeze(0).expand(B, T)
    losses = []
    for _ in range(STEPS):
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(master[n].detach().to(p.dtype))  # round to nearest even (or copy)
        pm.zero_grad(set_to_none=True)
        loss = full.mean_loss(pm(input_ids=tokens[:, :T], position_ids=pos).logits, tokens)
        loss.backward()
        for n, p in params.items():
            master[n].grad = p.grad.detach().float()
        torch.nn.utils.clip_grad_norm_(list(master.values()), OPT["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return np.array(losses)


def initial_adapters(base_init, g):
    """PEFT's adapter parameters {name: fp32 tensor}: A ~ U(+-1/sqrt(in)), B ~ N(0, 0.02)
    from g (gen_peft_reference's init_adapters), so neither is zero."""
    pm, params = peft_model(base_init, "eager", torch.float32, False)
    pref.init_adapters(pm, g)
    return {n: p.detach().clone() for n, p in params.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "hf"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
    torch.manual_seed(full.SEED)

    base_init, g = full.initial_weights()
    tokens, mask, segment = full.make_batch(g)
    adapters = initial_adapters(base_init, g)

    fp32 = train(base_init, adapters, tokens, "eager", torch.float32)
    bf16 = train(base_init, adapters, tokens, "eager", torch.bfloat16)
    bf16_sdpa = train(base_init, adapters, tokens, "sdpa", torch.bfloat16)
    bf16_f32a = train(base_init, adapters, tokens, "eager", torch.bfloat16, fp32_adapters=True)
    assert fp32[-1] < 0.9 * fp32[0] and bf16[-1] < 0.9 * bf16[0], (fp32, bf16)
    # bf16 matters here (each variant leaves fp32's trajectory by more than the C test's
    # 1e-5 fp32 tolerance), and the variants are distinct runs that stay close
    ens = np.stack([bf16, bf16_sdpa, bf16_f32a])
    assert all(np.max(np.abs(v - fp32) / fp32) > 5e-5 for v in ens), ens
    rel = (ens.max(0) - ens.min(0)) / ens.min(0)
    assert 0 < rel.max() < 1e-3 and len({v.tobytes() for v in ens}) == 3, rel

    path = os.path.join(args.out, CASE + ".h5")
    kw = dict(track_times=False)
    with create_weights_file(path, GENERATOR, CASE, full.SEED) as f:
        f.attrs["peft_version"] = sattr(peft.__version__)
        full.write_base(f, base_init, tokens, mask, segment)
        # the lora settings on /adapter, not in a /lora group: ftmpi's tools take a file
        # with /lora for a LoRA checkpoint, and the test exports this file's base
        ag = f.create_group("adapter")
        ag.attrs["rank"] = np.int32(LORA["rank"])
        ag.attrs["alpha"] = np.float64(LORA["alpha"])
        ag.attrs["dropout"] = np.float64(LORA["dropout"])
        ag.attrs["targets"] = sattr(",".join(TARGETS))
        keys = dict(pref.adapter_names("llama", n) for n in adapters)
        ft = pref.to_ftmpi_adapters("llama", adapters)
        for n in sorted(ft):
            d = ag.create_dataset(n, data=ft[n].numpy().astype("<f4"), **kw)
            d.attrs["peft_key"] = sattr(keys[n])
        tg = f.create_group("expected").create_group("train")
        for k, v in OPT.items():
            tg.attrs[k] = np.float64(v)
        tg.attrs["steps"] = np.int32(STEPS)
        tg.create_dataset("loss_fp32", data=fp32.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16", data=bf16.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16_sdpa", data=bf16_sdpa.astype("<f8"), **kw)
        tg.create_dataset("loss_bf16_fp32_adapters", data=bf16_f32a.astype("<f8"), **kw)

    print("torch %s, transformers %s, peft %s" % (torch.__version__, transformers.__version__,
                                                  peft.__version__))
    for name, v in (("fp32", fp32), ("bf16", bf16), ("bf16 sdpa", bf16_sdpa),
                    ("bf16 fp32 adapters", bf16_f32a)):
        print("%-18s %s" % (name, " ".join("%.4f" % x for x in v[::5])))
    print("bf16 ensemble spread: max rel %.5f, final rel %.5f; bf16 vs fp32 final rel %.5f"
          % (rel.max(), rel[-1], abs(bf16[-1] - fp32[-1]) / fp32[-1]))
    print("%s %d B sha256=%s" % (path, os.path.getsize(path), sha256(path)[:16]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
