#!/usr/bin/env python3
"""Generate the committed Hugging Face reference files for ftmpi's model tests.

    python3 test/reference/gen_hf_reference.py --out test/data/hf

Builds tiny random fp32 causal LMs of each family ftmpi trains
(``LlamaForCausalLM``, ``Qwen2ForCausalLM``, ``Qwen3ForCausalLM``,
``MistralForCausalLM``) on the CPU (eager attention, dropout 0) and writes one HDF5
file per case.  Each file is a valid ftmpi weights
file (``/config`` + ``/model/<HF name>``, root attrs ``ftmpi_format="weights"``,
``format_version=1``, see doc/formats.md) plus:

    /batch/tokens      uint32 [B, T+1]   dataset-format row (inputs [:, :T], targets [:, 1:])
    /batch/loss_mask   uint8  [B, T+1]   entry j governs the prediction of token j; entry 0 unused
    /batch/segment     int32  [B, T+1]   document index within the row
    /expected/logits   float32 [B, T, vocab]
    /expected/loss     float64 scalar    sum of target-token CE / number of targets (whole batch)
    /expected/grad/<HF name>             float32, d loss / d param (tied: embed_tokens only)
    /expected/adamw/step{1,2,3}/loss     float64 scalar
    /expected/adamw/after/<HF name>      float32, weights after 3 AdamW steps on the same batch
    /expected/adamw attrs: lr, beta1, beta2, eps, weight_decay (2-D params), weight_decay_1d

String attributes are FIXED-LENGTH HDF5 strings (UTF-8 character set, content pure
ASCII, H5T_STR_NULLPAD as h5py writes them: the stored size is the string length, no
terminating NUL) so a C reader needs only H5Tget_size + a buffer of size+1.

Document masking (case hf_llama3rope): HF has no packed-document attention mask that
is stable across versions, so the reference logits are computed by running every
document of a row SEPARATELY through the model (position ids 0..len-1) and
concatenating the per-document logits along the row.  The loss and gradients are
taken through that concatenation.  The single-document cases go through the same code
path (one document = the whole row) and are additionally cross-checked against a
plain batched HF forward and HF's own ``labels=`` loss.

Determinism: seeds are fixed per case, torch runs single-threaded with deterministic
algorithms, and h5py object time stamps are disabled (track_times=False), so two runs
on the same machine / library versions give byte-identical files.  Different CPUs or
torch builds may change the last bits of the float results (not the batch/model
tensors, which come from the seeded CPU generator).
"""

import argparse
import hashlib
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

GENERATOR = "gen_hf_reference.py"
FORMAT_VERSION = 1

# Shared model / batch shape (GQA: 4 query heads over 2 key/value heads).
BASE = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=160,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rms_norm_eps=1e-5,
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
)
B, T = 2, 24

ADAMW = dict(lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, weight_decay_1d=0.0)
ADAMW_STEPS = 3

LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
# llama3 rule for head_dim 16, theta 500000, original ctx 64:
#   low_freq_wavelen = 64 / 1 = 64, high_freq_wavelen = 64 / 4 = 16,
#   wavelen_i = 2*pi * 500000^(2i/16):  i=0 -> 6.28   (< 16: kept unchanged)
#                                       i=1 -> 32.5   (16..64: smooth interpolation)
#                                       i=2..7 -> 167 .. 2.4e6 (> 64: divided by factor 8)
# so all three branches are exercised; build_model() asserts this.

# Family -> (config class, model class, config keywords beyond BASE). The keywords
# switch off what ftmpi does not train (Qwen's sliding-window layers, Qwen3's o/q/k/v
# biases) and name what it does.
FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM,
              dict(attention_bias=False, mlp_bias=False, pretraining_tp=1)),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, dict(use_sliding_window=False)),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, dict(use_sliding_window=False,
                                                  attention_bias=False)),
    "mistral": (MistralConfig, MistralForCausalLM, dict()),
}

CASES = [
    # name,            seed, rope_theta, rope_scaling,   tied,  documents per row, family, extra config
    ("hf_basic",       1001, 50000.0,    None,           False, [[25], [25]], "llama", {}),
    ("hf_llama3rope",  1002, 500000.0,   LLAMA3_SCALING, False, [[9, 7, 9], [14, 11]], "llama", {}),
    ("hf_tied",        1003, 20000.0,    None,           True,  [[25], [25]], "llama", {}),
    # Qwen2: q/k/v biases; packed rows untied, single documents tied (Qwen2.5-0.5B style)
    ("hf_qwen2",       1101, 1000000.0,  None,           False, [[9, 7, 9], [14, 11]], "qwen2", {}),
    ("hf_qwen2_tied",  1104, 1000000.0,  None,           True,  [[25], [25]], "qwen2", {}),
    # Qwen3: q/k RMSNorm per head, head_dim 24 != hidden / heads = 16
    ("hf_qwen3",       1201, 1000000.0,  None,           False, [[9, 7, 9], [14, 11]], "qwen3",
     {"head_dim": 24}),
    # Mistral: sliding window of 5 keys; a whole row of 24 inputs and a packed row
    ("hf_mistral",     1301, 1000000.0,  None,           False, [[25], [14, 11]], "mistral",
     {"sliding_window": 5}),
]


# ----------------------------------------------------------------------------- helpers

def sattr(s):
    """Fixed-length UTF-8 (ASCII content) string attribute value."""
    b = s.encode("ascii")
    return np.array(b, dtype=h5py.string_dtype("utf-8", len(b)))


def ref_inv_freq(theta, hd, scaling):
    """Independent re-implementation of HF's default / llama3 inverse frequencies."""
    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    branches = set()
    if scaling is None:
        return inv, branches
    f, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_wl, high_wl = old / lo, old / hi
    out = np.empty_like(inv)
    for i, v in enumerate(inv):
        wl = 2 * math.pi / v
        if wl < high_wl:
            out[i] = v
            branches.add("keep")
        elif wl > low_wl:
            out[i] = v / f
            branches.add("divide")
        else:
            s = (old / wl - lo) / (hi - lo)
            out[i] = (1 - s) * v / f + s * v
            branches.add("smooth")
    return out, branches


def build_model(seed, theta, scaling, tied, family, extra):
    config_cls, model_cls, family_kw = FAMILIES[family]
    kw = dict(BASE)
    kw.update(rope_theta=theta, tie_word_embeddings=tied, attention_dropout=0.0,
              hidden_act="silu", use_cache=False)
    kw.update(family_kw)
    kw.update(extra)
    if scaling is not None:
        # legacy spelling; transformers >= 5 folds it into config.rope_parameters
        kw["rope_scaling"] = dict(scaling)
    cfg = config_cls(**kw)
    model = model_cls._from_config(cfg, attn_implementation="eager")
    assert model.config.head_dim == kw["head_dim"]
    assert getattr(model.config, "sliding_window", None) == extra.get("sliding_window"), \
        getattr(model.config, "sliding_window", None)
    assert model.config._attn_implementation == "eager"
    model.float().eval()  # eval(): no dropout anywhere (dropout is 0 anyway)

    # Explicit seeded init, independent of HF's _init_weights: N(0, 0.02) for matrices,
    # 1 + 0.1 N(0, 1) for RMSNorm weights (so norm gradients are non-trivial),
    # N(0, 0.1) for biases (large enough to move the logits).
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied head appears once (as embed_tokens)
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    if tied:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    else:
        assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()

    # RoPE sanity: HF's inv_freq must match the formula above (and, for llama3,
    # hit all three branches); no attention scaling for llama3.
    ref, branches = ref_inv_freq(theta, model.config.head_dim, scaling)
    hf = model.model.rotary_emb.inv_freq.double().numpy()
    assert np.allclose(hf, ref, rtol=1e-6, atol=0), (hf, ref)
    assert float(model.model.rotary_emb.attention_scaling) == 1.0
    if scaling is not None:
        assert branches == {"keep", "smooth", "divide"}, branches
    return model, g


def make_batch(g, docs):
    V = BASE["vocab_size"]
    tokens = torch.randint(0, V, (B, T + 1), generator=g).to(torch.int64)
    mask = (torch.rand((B, T + 1), generator=g) < 0.8).to(torch.uint8)
    segment = torch.zeros((B, T + 1), dtype=torch.int32)
    for b, lens in enumerate(docs):
        assert sum(lens) == T + 1
        start = 0
        for d, n in enumerate(lens):
            segment[b, start:start + n] = d
            mask[b, start] = 0  # first token of a document is never a target
            start += n
    mask[:, 0] = 0
    return tokens, mask, segment


def doc_spans(segment_row):
    """[(start, end)) column ranges of the documents in one row."""
    s = segment_row.tolist()
    spans, start = [], 0
    for j in range(1, len(s) + 1):
        if j == len(s) or s[j] != s[start]:
            spans.append((start, j))
            start = j
    return spans


def forward_docs(model, tokens, segment):
    """Logits [B, T, V]: each document of each row run separately, positions from 0."""
    rows = []
    for b in range(B):
        parts = []
        for s, e in doc_spans(segment[b]):
            e = min(e, T)  # column T is only a target, never an input
            if e <= s:
                continue
            ids = tokens[b:b + 1, s:e]
            pos = torch.arange(e - s, dtype=torch.int64).unsqueeze(0)
            parts.append(model(input_ids=ids, position_ids=pos, use_cache=False).logits[0])
        rows.append(torch.cat(parts, 0))
    logits = torch.stack(rows, 0)
    assert logits.shape == (B, T, BASE["vocab_size"])
    return logits


def loss_from_logits(logits, tokens, mask):
    """Mean CE over target tokens (mask==1 at columns 1..T) of the whole batch, fp32."""
    targets = tokens[:, 1:].clone()
    targets[mask[:, 1:] == 0] = -100
    n = int((mask[:, 1:] == 1).sum())
    per_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                              targets.reshape(-1), ignore_index=-100, reduction="sum")
    return per_sum / n, n


def param_dict(model):
    return {n: p for n, p in model.named_parameters()}


def create_weights_file(path, generator, case, seed):
    """A new ftmpi weights file at path (replacing any), with the root attributes every
    reference file carries; the caller writes /config, /model and the rest."""
    if os.path.exists(path):
        os.remove(path)
    f = h5py.File(path, "w", libver="earliest", track_order=False)
    f.attrs["ftmpi_format"] = sattr("weights")
    f.attrs["format_version"] = np.int32(FORMAT_VERSION)
    f.attrs["generator"] = sattr(generator)
    f.attrs["transformers_version"] = sattr(transformers.__version__)
    f.attrs["torch_version"] = sattr(torch.__version__)
    f.attrs["case"] = sattr(case)
    f.attrs["seed"] = np.int64(seed)
    return f


def write_config(f, family, theta, scaling, tied, head_dim, extra):
    """/config of a Llama-style case (the attributes ftmpi's weights reader takes)."""
    c = f.create_group("config")
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim",
              "max_position_embeddings"):
        c.attrs[k] = np.int32(head_dim if k == "head_dim" else BASE[k])
    if family != "llama":  # Llama files keep their pre-family layout
        c.attrs["model_family"] = sattr(family)
    if extra.get("sliding_window"):
        c.attrs["sliding_window"] = np.int32(extra["sliding_window"])
    c.attrs["rms_norm_eps"] = np.float64(BASE["rms_norm_eps"])
    c.attrs["rope_theta"] = np.float64(theta)
    c.attrs["tie_word_embeddings"] = np.int32(1 if tied else 0)
    c.attrs["bos_token_id"] = np.int32(BASE["bos_token_id"])
    c.attrs["eos_token_id"] = np.int32(BASE["eos_token_id"])
    if scaling is None:
        c.attrs["rope_scaling_type"] = sattr("none")
    else:
        c.attrs["rope_scaling_type"] = sattr(scaling["rope_type"])
        c.attrs["rope_scaling_factor"] = np.float64(scaling["factor"])
        c.attrs["rope_scaling_low_freq_factor"] = np.float64(scaling["low_freq_factor"])
        c.attrs["rope_scaling_high_freq_factor"] = np.float64(scaling["high_freq_factor"])
        c.attrs["rope_scaling_original_max_position_embeddings"] = \
            np.int32(scaling["original_max_position_embeddings"])


def write_batch(f, tokens, mask, segment):
    """/batch/{tokens,loss_mask,segment} in the dataset format."""
    ds_kw = dict(track_times=False)
    bg = f.create_group("batch")
    bg.create_dataset("tokens", data=tokens.numpy().astype("<u4"), **ds_kw)
    bg.create_dataset("loss_mask", data=mask.numpy().astype("u1"), **ds_kw)
    bg.create_dataset("segment", data=segment.numpy().astype("<i4"), **ds_kw)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


# ----------------------------------------------------------------------------- main work

def write_case(out_dir, name, seed, theta, scaling, tied, docs, family, extra):
    torch.manual_seed(seed)
    model, g = build_model(seed, theta, scaling, tied, family, extra)
    head_dim = model.config.head_dim
    tokens, mask, segment = make_batch(g, docs)
    init = {n: p.detach().clone() for n, p in param_dict(model).items()}

    # --- forward / loss / grad
    logits = forward_docs(model, tokens, segment)
    loss, n_targets = loss_from_logits(logits, tokens, mask)
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in param_dict(model).items()}
    logits = logits.detach()

    # --- validations
    with torch.no_grad():
        # separate-document logits are reproducible (what we store is what HF gives)
        again = forward_docs(model, tokens, segment)
        assert torch.equal(again, logits)
        if all(len(l) == 1 for l in docs):
            # plain batched HF forward (default positions 0..T-1) agrees
            batched = model(input_ids=tokens[:, :T], use_cache=False).logits
            assert torch.allclose(batched, logits, rtol=1e-5, atol=1e-6), \
                (batched - logits).abs().max()
            # HF's own labels= loss: feed T+1 tokens, HF shifts labels internally;
            # causal attention makes logits at 0..T-1 identical to the T-token forward.
            labels = tokens.clone()
            labels[mask == 0] = -100
            hf_loss = model(input_ids=tokens, labels=labels, use_cache=False).loss
            assert abs(hf_loss.item() - loss.item()) <= 1e-6 * abs(loss.item()), \
                (hf_loss.item(), loss.item())
        else:
            # each document alone == the row's logits restricted to that document
            # (trivially true by construction); also check that the packed row WITHOUT
            # document masking differs, i.e. the masking matters for this batch.
            packed = model(input_ids=tokens[:, :T], use_cache=False).logits
            assert not torch.allclose(packed, logits, atol=1e-4)

        if extra.get("sliding_window"):
            # the window matters for this batch: without it the logits differ
            model.config.sliding_window = None
            unwindowed = forward_docs(model, tokens, segment)
            model.config.sliding_window = extra["sliding_window"]
            assert not torch.allclose(unwindowed, logits, atol=1e-4)
            assert torch.equal(forward_docs(model, tokens, segment), logits)

    # --- AdamW: 3 steps on the same batch, decay on 2-D params only
    params = param_dict(model)
    decay = [p for n, p in params.items() if p.ndim == 2]
    no_decay = [p for n, p in params.items() if p.ndim != 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": ADAMW["weight_decay"]},
         {"params": no_decay, "weight_decay": ADAMW["weight_decay_1d"]}],
        lr=ADAMW["lr"], betas=(ADAMW["beta1"], ADAMW["beta2"]), eps=ADAMW["eps"], foreach=False)
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(init[n])
    step_losses = []
    for k in range(ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        lk, _ = loss_from_logits(forward_docs(model, tokens, segment), tokens, mask)
        lk.backward()
        if k == 0:
            assert lk.item() == loss.item()
            for n, p in params.items():
                assert torch.equal(p.grad, grads[n]), n
        opt.step()
        step_losses.append(lk.item())
    opt.zero_grad(set_to_none=True)
    after = {n: p.detach().clone() for n, p in params.items()}
    assert step_losses[-1] < step_losses[0]

    # --- write
    path = os.path.join(out_dir, name + ".h5")
    ds_kw = dict(track_times=False)
    with create_weights_file(path, GENERATOR, name, seed) as f:
        write_config(f, family, theta, scaling, tied, head_dim, extra)

        def put_tensors(group, tensors):
            for n in sorted(tensors):
                group.create_dataset(n, data=tensors[n].numpy().astype("<f4"), **ds_kw)

        put_tensors(f.create_group("model"), init)

        write_batch(f, tokens, mask, segment)

        eg = f.create_group("expected")
        eg.create_dataset("logits", data=logits.numpy().astype("<f4"), **ds_kw)
        eg.create_dataset("loss", data=np.float64(loss.item()), **ds_kw)
        put_tensors(eg.create_group("grad"), grads)
        ag = eg.create_group("adamw")
        for k, v in ADAMW.items():
            ag.attrs[k] = np.float64(v)
        ag.attrs["steps"] = np.int32(ADAMW_STEPS)
        for k, lk in enumerate(step_losses, 1):
            ag.create_group("step%d" % k).create_dataset("loss", data=np.float64(lk), **ds_kw)
        put_tensors(ag.create_group("after"), after)

    print("%-15s %-7s theta=%-8g scaling=%-6s tied=%d docs=%-16s targets=%2d loss=%.7f "
          "adamw=[%s] %7d B sha256=%s" % (
              name, family, theta, scaling["rope_type"] if scaling else "none", tied,
              str([len(l) for l in docs]), n_targets, loss.item(),
              ", ".join("%.5f" % x for x in step_losses), os.path.getsize(path),
              sha256(path)[:16]))
    assert os.path.getsize(path) < 2 * 1024 * 1024
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "hf"),
                    help="output directory (default: test/data/hf)")
    ap.add_argument("--case", action="append", help="only this case (repeatable)")
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()  # orig_max_pos == max_pos warning is expected
    os.makedirs(args.out, exist_ok=True)
    print("torch %s, transformers %s, h5py %s" % (torch.__version__, transformers.__version__,
                                                  h5py.__version__))
    for case in CASES:
        if args.case and case[0] not in args.case:
            continue
        write_case(args.out, *case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
