#!/usr/bin/env python3
"""Re-verify ftmpi HF reference files against the installed transformers.

    python3 test/reference/check_hf_reference.py test/data/hf/*.h5

For developers (not run by CI).  Everything is rebuilt from the file alone: the
LlamaConfig from the /config attributes, the weights from /model, the batch from
/batch.  Then it checks

  * the file layout (root attrs, /config attrs, every HF parameter present with the
    right shape and fp32, no lm_head when tied, dataset-format mask/segment rules);
  * /expected/logits   (each document run separately, positions from 0), and again
    via ONE packed forward with an explicit 4-D block-diagonal causal mask and
    per-document position ids (informational: HF's handling of custom 4-D masks is
    version dependent; a mismatch there is reported as a warning, not a failure);
  * /expected/loss     (and HF's own labels= loss for single-document rows);
  * /expected/grad/*;
  * /expected/adamw/step*/loss and /expected/adamw/after/* (torch.optim.AdamW with
    the hyper-parameters stored as attributes on /expected/adamw).

Tolerances are loose enough for a different torch / transformers / CPU
(rtol 1e-4 relative to each tensor's max magnitude).  Exit status 0 = all good.
"""

import argparse
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

TOL = 1e-4


def s(v):
    return v.decode() if isinstance(v, (bytes, np.bytes_)) else str(v)


def expected_names(L, tied):
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    for i in range(L):
        p = "model.layers.%d." % i
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
        names += [p + "self_attn.%s_proj.weight" % x for x in "qkvo"]
        names += [p + "mlp.%s_proj.weight" % x for x in ("gate", "up", "down")]
    if not tied:
        names.append("lm_head.weight")
    return sorted(names)


class Checker:
    def __init__(self, path):
        self.path, self.fail, self.warn = path, 0, 0

    def ok(self, cond, what):
        if not cond:
            print("  FAIL %s" % what)
            self.fail += 1

    def close(self, got, exp, what, tol=TOL):
        got = got.detach().double() if torch.is_tensor(got) else torch.as_tensor(got).double()
        exp = torch.as_tensor(np.asarray(exp)).double()
        scale = max(exp.abs().max().item(), 1e-30)
        err = (got - exp).abs().max().item() / scale
        self.ok(got.shape == exp.shape and err <= tol,
                "%s: shape %s vs %s, rel max err %.3g" % (what, tuple(got.shape),
                                                         tuple(exp.shape), err))
        return err


def build(f):
    c = f["config"].attrs
    kw = dict(vocab_size=int(c["vocab_size"]), hidden_size=int(c["hidden_size"]),
              intermediate_size=int(c["intermediate_size"]),
              num_hidden_layers=int(c["num_hidden_layers"]),
              num_attention_heads=int(c["num_attention_heads"]),
              num_key_value_heads=int(c["num_key_value_heads"]), head_dim=int(c["head_dim"]),
              max_position_embeddings=int(c["max_position_embeddings"]),
              rms_norm_eps=float(c["rms_norm_eps"]), rope_theta=float(c["rope_theta"]),
              tie_word_embeddings=bool(int(c["tie_word_embeddings"])),
              bos_token_id=int(c["bos_token_id"]), eos_token_id=int(c["eos_token_id"]),
              attention_dropout=0.0, use_cache=False)
    rt = s(c["rope_scaling_type"])
    if rt == "llama3":
        kw["rope_scaling"] = dict(
            rope_type="llama3", factor=float(c["rope_scaling_factor"]),
            low_freq_factor=float(c["rope_scaling_low_freq_factor"]),
            high_freq_factor=float(c["rope_scaling_high_freq_factor"]),
            original_max_position_embeddings=int(c["rope_scaling_original_max_position_embeddings"]))
    elif rt != "none":
        raise ValueError("unknown rope_scaling_type %r" % rt)
    model = LlamaForCausalLM._from_config(LlamaConfig(**kw), attn_implementation="eager")
    model.float().eval()
    sd = {n: torch.from_numpy(f["model"][n][()]) for n in f["model"]}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    # tied: lm_head.weight is reported missing but shares embed_tokens' storage
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    if kw["tie_word_embeddings"]:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    return model, kw


def spans(row):
    out, start = [], 0
    for j in range(1, len(row) + 1):
        if j == len(row) or row[j] != row[start]:
            out.append((start, j))
            start = j
    return out


def forward_docs(model, tokens, segment, T):
    rows = []
    for b in range(tokens.shape[0]):
        parts = []
        for a, e in spans(segment[b].tolist()):
            e = min(e, T)
            if e > a:
                pos = torch.arange(e - a).unsqueeze(0)
                parts.append(model(input_ids=tokens[b:b + 1, a:e], position_ids=pos,
                                   use_cache=False).logits[0])
        rows.append(torch.cat(parts, 0))
    return torch.stack(rows, 0)


def batch_loss(logits, tokens, mask):
    tgt = tokens[:, 1:].clone()
    tgt[mask[:, 1:] == 0] = -100
    n = int((mask[:, 1:] == 1).sum())
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                           ignore_index=-100, reduction="sum") / n


def check(path):
    ck = Checker(path)
    print("%s" % path)
    with h5py.File(path, "r") as f:
        # ---------------------------------------------------------------- layout
        ck.ok(s(f.attrs["ftmpi_format"]) == "weights", "ftmpi_format")
        ck.ok(int(f.attrs["format_version"]) == 1, "format_version")
        print("  case=%s seed=%d generated with torch %s / transformers %s; now torch %s / "
              "transformers %s" % (s(f.attrs["case"]), int(f.attrs["seed"]),
                                   s(f.attrs["torch_version"]),
                                   s(f.attrs["transformers_version"]), torch.__version__,
                                   transformers.__version__))
        model, kw = build(f)
        tied = kw["tie_word_embeddings"]
        L = kw["num_hidden_layers"]
        names = expected_names(L, tied)
        ck.ok(sorted(f["model"]) == names, "/model names")
        ck.ok(sorted(f["expected/grad"]) == names, "/expected/grad names")
        ck.ok(sorted(f["expected/adamw/after"]) == names, "/expected/adamw/after names")
        params = dict(model.named_parameters())
        for n in names:
            for g in ("model", "expected/grad", "expected/adamw/after"):
                d = f[g][n]
                ck.ok(d.dtype == np.dtype("<f4") and d.shape == tuple(params[n].shape),
                      "%s/%s dtype/shape" % (g, n))

        tokens_np = f["batch/tokens"][()]
        mask_np = f["batch/loss_mask"][()]
        seg_np = f["batch/segment"][()]
        ck.ok(tokens_np.dtype == np.dtype("<u4") and mask_np.dtype == np.dtype("u1")
              and seg_np.dtype == np.dtype("<i4"), "batch dtypes")
        B, T1 = tokens_np.shape
        T = T1 - 1
        ck.ok((mask_np[:, 0] == 0).all(), "loss_mask[:, 0] == 0")
        for b in range(B):
            for a, e in spans(seg_np[b].tolist()):
                ck.ok(mask_np[b, a] == 0, "first token of a document has mask 0")
        ck.ok(int(tokens_np.max()) < kw["vocab_size"], "token ids < vocab")

        tokens = torch.from_numpy(tokens_np.astype(np.int64))
        mask = torch.from_numpy(mask_np)
        segment = torch.from_numpy(seg_np)
        single_doc = all(len(spans(seg_np[b].tolist())) == 1 for b in range(B))

        # ---------------------------------------------------------------- forward
        logits = forward_docs(model, tokens, segment, T)
        e = ck.close(logits, f["expected/logits"][()], "logits")
        loss = batch_loss(logits, tokens, mask)
        ck.close(loss, f["expected/loss"][()], "loss", tol=1e-5)
        print("  logits rel err %.2e, loss %.7f (stored %.7f)" % (
            e, loss.item(), f["expected/loss"][()]))

        with torch.no_grad():
            # packed forward with an explicit block-diagonal causal mask
            sg = segment[:, :T]
            pos = torch.zeros((B, T), dtype=torch.int64)
            for j in range(1, T):
                pos[:, j] = torch.where(sg[:, j] == sg[:, j - 1], pos[:, j - 1] + 1, 0)
            allowed = (sg[:, :, None] == sg[:, None, :]) & torch.ones(T, T).tril().bool()
            m4 = torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[:, None]
            try:
                packed = model(input_ids=tokens[:, :T], position_ids=pos, attention_mask=m4,
                               use_cache=False).logits
                err = (packed - torch.from_numpy(f["expected/logits"][()])).abs().max().item()
                if err > 1e-4:
                    print("  WARN packed 4-D-mask forward differs by %.3g (transformers may "
                          "not honour custom 4-D masks)" % err)
                    ck.warn += 1
                else:
                    print("  packed 4-D-mask forward agrees (max abs err %.2e)" % err)
            except Exception as ex:  # noqa: BLE001 - informational only
                print("  WARN packed 4-D-mask forward not supported: %s" % ex)
                ck.warn += 1
            if single_doc:
                labels = tokens.clone()
                labels[mask == 0] = -100
                hf = model(input_ids=tokens, labels=labels, use_cache=False).loss
                ck.close(hf, f["expected/loss"][()], "HF labels= loss", tol=1e-5)

        # ---------------------------------------------------------------- grads
        model.zero_grad(set_to_none=True)
        loss.backward()
        worst = 0.0
        for n in names:
            worst = max(worst, ck.close(params[n].grad, f["expected/grad"][n][()], "grad " + n))
        print("  grads: worst rel err %.2e over %d tensors" % (worst, len(names)))

        # ---------------------------------------------------------------- AdamW
        a = f["expected/adamw"].attrs
        opt = torch.optim.AdamW(
            [{"params": [p for p in params.values() if p.ndim == 2],
              "weight_decay": float(a["weight_decay"])},
             {"params": [p for p in params.values() if p.ndim != 2],
              "weight_decay": float(a.get("weight_decay_1d", 0.0))}],
            lr=float(a["lr"]), betas=(float(a["beta1"]), float(a["beta2"])),
            eps=float(a["eps"]), foreach=False)
        steps = int(a.get("steps", 3))
        for k in range(1, steps + 1):
            opt.zero_grad(set_to_none=True)
            lk = batch_loss(forward_docs(model, tokens, segment, T), tokens, mask)
            lk.backward()
            opt.step()
            ck.close(lk, f["expected/adamw/step%d/loss" % k][()], "adamw step%d loss" % k,
                     tol=1e-5)
        worst = 0.0
        for n in names:
            worst = max(worst, ck.close(params[n], f["expected/adamw/after"][n][()],
                                        "adamw after " + n))
        print("  adamw: %d steps, worst rel err %.2e" % (steps, worst))
    print("  %s (%d failures, %d warnings)" % ("OK" if ck.fail == 0 else "FAILED", ck.fail,
                                                ck.warn))
    return ck.fail == 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Re-verify ftmpi HF reference files.")
    ap.add_argument("files", nargs="+", help="hf_*.h5 files written by gen_hf_reference.py")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    good = all([check(p) for p in args.files])
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
