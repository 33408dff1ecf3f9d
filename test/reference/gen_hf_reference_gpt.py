#!/usr/bin/env python3
"""Generate the Hugging Face reference files of the GPT families (GPT-NeoX, GPT-J).

    python3 test/reference/gen_hf_reference_gpt.py --out test/data/hf

The same files as gen_hf_reference.py (whose batch, loss, document and AdamW code
this script reuses; see its docstring for the layout of a file) for tiny random fp32
``GPTNeoXForCausalLM`` and ``GPTJForCausalLM`` models. One difference: ftmpi names
every family's tensors the Llama way (doc/formats.md), so /model, /expected/grad and
/expected/adamw/after hold the parameters under ftmpi's names, GPT-NeoX's fused
query_key_value split into q/k/v here, independently of ftmpi-convert's C code:

    per head h: rows [3h*hd, 3h*hd+hd) are q, the next hd rows k, the next hd rows v.

The cases cover: parallel and sequential residual (use_parallel_residual), exact and
tanh GELU, attention biases on and off, partial rotary (rotary_pct 0.25 and 0.5;
GPT-J's rotary_dim 8 of head_dim 16, interleaved), packed rows with documents.
"""

import argparse
import os
import sys

import numpy as np
import torch
from transformers import GPTJConfig, GPTJForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_hf_reference as ref  # noqa: E402

GENERATOR = "gen_hf_reference_gpt.py"
V, H, I, L, NH, MAXPOS, EPS = 97, 64, 160, 2, 4, 64, 1e-5
HD = H // NH

CASES = [
    # name,           seed, family,     docs per row,             config keywords
    ("hf_neox",       1401, "gpt_neox", [[9, 7, 9], [14, 11]],
     dict(use_parallel_residual=True, rotary_pct=0.25, rotary_emb_base=10000.0,
          hidden_act="gelu", attention_bias=True)),
    ("hf_neox_seq",   1402, "gpt_neox", [[25], [25]],
     dict(use_parallel_residual=False, rotary_pct=0.5, rotary_emb_base=20000.0,
          hidden_act="gelu_new", attention_bias=False)),
    ("hf_gptj",       1501, "gptj",     [[9, 7, 9], [14, 11]],
     dict(rotary_dim=8, activation_function="gelu_new")),
]


def build_model(seed, family, kw):
    if family == "gpt_neox":
        cfg = GPTNeoXConfig(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L,
                            num_attention_heads=NH, max_position_embeddings=MAXPOS,
                            layer_norm_eps=EPS, tie_word_embeddings=False, bos_token_id=1,
                            eos_token_id=2, attention_dropout=0.0, hidden_dropout=0.0,
                            use_cache=False, **kw)
        model = GPTNeoXForCausalLM._from_config(cfg, attn_implementation="eager")
    else:
        cfg = GPTJConfig(vocab_size=V, n_embd=H, n_inner=I, n_layer=L, n_head=NH,
                         n_positions=MAXPOS, layer_norm_epsilon=EPS, tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, use_cache=False, **kw)
        model = GPTJForCausalLM._from_config(cfg, attn_implementation="eager")
    model.float().eval()
    # N(0, 0.02) matrices, 1 + 0.1 N(0,1) norm weights, N(0, 0.1) biases (as the
    # Llama-family goldens)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
    return model, g


def rot_dim(family, kw):
    return int(HD * kw["rotary_pct"]) if family == "gpt_neox" else kw["rotary_dim"]


def to_ftmpi(family, tensors):
    """HF name -> tensor, to ftmpi's Llama-style names (q/k/v split for NeoX)."""
    out = {}
    for n, t in tensors.items():
        parts = n.split(".")
        if family == "gpt_neox":
            if n == "gpt_neox.embed_in.weight":
                out["model.embed_tokens.weight"] = t
            elif n.startswith("gpt_neox.final_layer_norm."):
                out["model.norm." + parts[-1]] = t
            elif n in ("embed_out.weight", "lm_head.weight"):  # transformers 5 renamed it
                out["lm_head.weight"] = t
            else:
                layer, rest = parts[2], ".".join(parts[3:])
                pre = "model.layers.%s." % layer
                if rest.startswith("attention.query_key_value."):
                    kind = parts[-1]
                    per_head = t.reshape(NH, 3, HD, *t.shape[1:])
                    for i, qkv in enumerate("qkv"):
                        out[pre + "self_attn.%s_proj.%s" % (qkv, kind)] = \
                            per_head[:, i].reshape(NH * HD, *t.shape[1:]).clone()
                    continue
                rest = (rest.replace("attention.dense.", "self_attn.o_proj.")
                            .replace("mlp.dense_h_to_4h.", "mlp.up_proj.")
                            .replace("mlp.dense_4h_to_h.", "mlp.down_proj."))
                out[pre + rest] = t
        else:
            if n == "transformer.wte.weight":
                out["model.embed_tokens.weight"] = t
            elif n.startswith("transformer.ln_f."):
                out["model.norm." + parts[-1]] = t
            elif n.startswith("lm_head."):
                out[n] = t
            else:
                layer, rest = parts[2], ".".join(parts[3:])
                for theirs, ours in (("ln_1.", "input_layernorm."),
                                     ("attn.out_proj.", "self_attn.o_proj."),
                                     ("attn.", "self_attn."), ("mlp.fc_in.", "mlp.up_proj."),
                                     ("mlp.fc_out.", "mlp.down_proj.")):
                    if rest.startswith(theirs):
                        rest = ours + rest[len(theirs):]
                        break
                out["model.layers.%s.%s" % (layer, rest)] = t
    assert len(set(out)) == len(out)
    return out


def write_config(f, family, kw):
    """/config of a GPT case: the Llama-style keys plus rotary_dim and the family's flags."""
    parallel = family == "gptj" or kw["use_parallel_residual"]
    c = f.create_group("config")
    for k, v in (("vocab_size", V), ("hidden_size", H), ("intermediate_size", I),
                 ("num_hidden_layers", L), ("num_attention_heads", NH),
                 ("num_key_value_heads", NH), ("head_dim", HD),
                 ("max_position_embeddings", MAXPOS)):
        c.attrs[k] = np.int32(v)
    c.attrs["model_family"] = ref.sattr(family)
    c.attrs["rms_norm_eps"] = np.float64(EPS)
    c.attrs["rope_theta"] = np.float64(kw.get("rotary_emb_base", 10000.0))
    c.attrs["rotary_dim"] = np.int32(rot_dim(family, kw))
    if family == "gpt_neox" and parallel:
        c.attrs["parallel_residual"] = np.int32(1)
    if kw.get("attention_bias"):
        c.attrs["attention_bias"] = np.int32(1)
    act = kw.get("hidden_act", kw.get("activation_function"))
    if act != "gelu":
        c.attrs["gelu_tanh"] = np.int32(1)
    c.attrs["tie_word_embeddings"] = np.int32(0)
    c.attrs["bos_token_id"] = np.int32(1)
    c.attrs["eos_token_id"] = np.int32(2)
    c.attrs["rope_scaling_type"] = ref.sattr("none")


def write_case(out_dir, name, seed, family, docs, kw):
    torch.manual_seed(seed)
    model, g = build_model(seed, family, kw)
    tokens, mask, segment = ref.make_batch(g, docs)
    params = dict(model.named_parameters())
    init = {n: p.detach().clone() for n, p in params.items()}

    logits = ref.forward_docs(model, tokens, segment)
    loss, n_targets = ref.loss_from_logits(logits, tokens, mask)
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in params.items()}
    logits = logits.detach()
    T = ref.T
    with torch.no_grad():
        if all(len(l) == 1 for l in docs):
            batched = model(input_ids=tokens[:, :T], use_cache=False).logits
            assert torch.allclose(batched, logits, rtol=1e-5, atol=1e-6)
        else:
            packed = model(input_ids=tokens[:, :T], use_cache=False).logits
            assert not torch.allclose(packed, logits, atol=1e-4)

    A = ref.ADAMW
    decay = [p for p in params.values() if p.ndim == 2]
    no_decay = [p for p in params.values() if p.ndim != 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": A["weight_decay"]},
         {"params": no_decay, "weight_decay": A["weight_decay_1d"]}],
        lr=A["lr"], betas=(A["beta1"], A["beta2"]), eps=A["eps"], foreach=False)
    step_losses = []
    for k in range(ref.ADAMW_STEPS):
        opt.zero_grad(set_to_none=True)
        lk, _ = ref.loss_from_logits(ref.forward_docs(model, tokens, segment), tokens, mask)
        lk.backward()
        if k == 0:
            assert lk.item() == loss.item()
        opt.step()
        step_losses.append(lk.item())
    after = {n: p.detach().clone() for n, p in params.items()}
    assert step_losses[-1] < step_losses[0]

    path = os.path.join(out_dir, name + ".h5")
    ds_kw = dict(track_times=False)
    with ref.create_weights_file(path, GENERATOR, name, seed) as f:
        write_config(f, family, kw)

        def put_tensors(group, tensors):
            tensors = to_ftmpi(family, tensors)
            for n in sorted(tensors):
                group.create_dataset(n, data=tensors[n].numpy().astype("<f4"), **ds_kw)

        put_tensors(f.create_group("model"), init)
        bg = f.create_group("batch")
        bg.create_dataset("tokens", data=tokens.numpy().astype("<u4"), **ds_kw)
        bg.create_dataset("loss_mask", data=mask.numpy().astype("u1"), **ds_kw)
        bg.create_dataset("segment", data=segment.numpy().astype("<i4"), **ds_kw)
        eg = f.create_group("expected")
        eg.create_dataset("logits", data=logits.numpy().astype("<f4"), **ds_kw)
        eg.create_dataset("loss", data=np.float64(loss.item()), **ds_kw)
        put_tensors(eg.create_group("grad"), grads)
        ag = eg.create_group("adamw")
        for k, v in A.items():
            ag.attrs[k] = np.float64(v)
        ag.attrs["steps"] = np.int32(ref.ADAMW_STEPS)
        for k, lk in enumerate(step_losses, 1):
            ag.create_group("step%d" % k).create_dataset("loss", data=np.float64(lk), **ds_kw)
        put_tensors(ag.create_group("after"), after)
    print("%-12s %-8s docs=%-10s targets=%2d loss=%.7f adamw=[%s] %7d B" % (
        name, family, str([len(l) for l in docs]), n_targets, loss.item(),
        ", ".join("%.5f" % x for x in step_losses), os.path.getsize(path)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(a.out, exist_ok=True)
    for name, seed, family, docs, kw in CASES:
        if not a.cases or name in a.cases:
            write_case(a.out, name, seed, family, docs, kw)


if __name__ == "__main__":
    main()
