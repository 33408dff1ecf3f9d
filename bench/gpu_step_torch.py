#!/usr/bin/env python3
"""HF transformers + PyTorch peer for bench/gpu_step.sh, on the same data file as ftmpi.

  gpu_step_torch.py data OUT.h5 --rows R --seq T --vocab V [--doc-len N] [--seed S]
      writes an ftmpi dataset file (doc/formats.md): random tokens below V, every token a
      target; one document per row, or with --doc-len packed documents of N/2..3N/2 tokens
      (the first token of each is no target, as ftmpi-prep writes them).
  gpu_step_torch.py step IN.h5 LAYERS DIM HEADS KV_HEADS FFN VOCAB BATCH [--tied]
                    [--steps 8] [--device cuda|cpu]
      trains a randomly initialised LlamaForCausalLM on IN.h5's rows in order: bf16
      autocast over fp32 master weights (ftmpi's bf16 recipe), SDPA attention, gradient
      checkpointing, fused AdamW, grad clip 1.0; the loss over the file's targets. Rows
      with documents get what ftmpi does with them: positions restarting at 0 in each
      document and a block-diagonal causal mask (a 4-D boolean mask: SDPA then runs its
      masked kernels, not the causal fast path). Prints one line:
        torch_step_ms=.. tokens_per_s=.. params=.. peak_mem_bytes=.. attention=causal|documents
      (the median of the steps after the first 3; peak memory is the allocator's peak of
      allocated bytes, torch.cuda.max_memory_allocated).
  gpu_step_torch.py check IN.h5 [--device cpu|cuda]
      checks the document masking on a tiny random model: the logits of every document of
      IN.h5's first rows, run packed, equal the document's logits run alone (exit 1 if not).
A reference peer for measurements, never a dependency of ftmpi. --device cpu runs it on
a tiny shape without a GPU (to check the script)."""
import argparse
import statistics
import sys
import time

import h5py
import numpy as np


def write_data(args):
    rng = np.random.default_rng(args.seed)
    width = args.seq + 1
    tokens = rng.integers(0, args.vocab, size=(args.rows, width), dtype=np.uint32)
    segment = np.zeros((args.rows, width), dtype=np.int32)
    mask = np.ones((args.rows, width), dtype=np.uint8)
    mask[:, 0] = 0
    docs = 0
    for r in range(args.rows):
        start, seg = 0, 0
        while start < width:
            n = width if not args.doc_len else int(rng.integers(args.doc_len // 2, args.doc_len * 3 // 2 + 1))
            segment[r, start:start + n] = seg
            mask[r, start] = 0  # a document's first token is not a target of the one before
            start, seg, docs = start + n, seg + 1, docs + 1
    with h5py.File(args.out, "w") as f:
        f.attrs["ftmpi_format"] = "dataset"
        f.attrs["format_version"] = np.int64(1)
        for k, v in (("seq_len", args.seq), ("vocab_size", args.vocab), ("bos_token_id", -1),
                     ("eos_token_id", -1), ("pad_token_id", -1), ("n_documents", docs),
                     ("n_target_tokens", int(mask[:, 1:].sum()))):
            f.attrs[k] = np.int64(v)
        f.attrs["tokenizer_hash"] = ""
        f.attrs["template"] = "synthetic"
        f.create_dataset("tokens", data=tokens)
        f.create_dataset("loss_mask", data=mask)
        f.create_dataset("segment", data=segment)
    # mean keys a query sees (causal, within its document) over the model's input
    # positions: the attention term of the FLOP count (bench/gpu_step.sh) for this data
    seen = 0
    for r in range(args.rows):
        _, counts = np.unique(segment[r, :args.seq], return_counts=True)
        seen += int((counts * (counts + 1) // 2).sum())
    print(f"rows={args.rows} documents={docs} avg_visible={seen / (args.rows * args.seq):.2f}")


def batch_inputs(torch, f, rows, seq, device):
    """input ids, targets (-100 where no target), position ids and the 4-D mask (None when
    every row is one document: SDPA's causal path) of rows `rows` of the file."""
    tok = torch.from_numpy(f["tokens"][rows].astype(np.int64))
    seg = torch.from_numpy(f["segment"][rows].astype(np.int64))
    msk = torch.from_numpy(f["loss_mask"][rows].astype(bool))
    ids, seg_in = tok[:, :seq], seg[:, :seq]
    targets = torch.where(msk[:, 1:], tok[:, 1:], torch.full_like(tok[:, 1:], -100))
    if bool((seg_in == 0).all()):
        pos = torch.arange(seq).expand(len(rows), seq)
        mask = None
    else:  # positions restart at each document's first token
        idx = torch.arange(seq).expand(len(rows), seq)
        first = torch.ones_like(seg_in, dtype=torch.bool)
        first[:, 1:] = seg_in[:, 1:] != seg_in[:, :-1]
        start = torch.cummax(torch.where(first, idx, torch.zeros_like(idx)), dim=1).values
        pos = idx - start
        causal = torch.ones(seq, seq, dtype=torch.bool).tril()
        mask = (causal & (seg_in[:, :, None] == seg_in[:, None, :]))[:, None].to(device)
    return ids.to(device), targets.to(device), pos.to(device), mask


def step(args):
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("no GPU")
        sys.exit(77)
    f = h5py.File(args.data, "r")
    seq = int(f.attrs["seq_len"])
    nrows = f["tokens"].shape[0]
    if nrows < args.batch * args.steps:
        sys.exit(f"gpu_step_torch: {args.data} has {nrows} rows, {args.steps} steps of batch {args.batch} need more")
    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.dim, intermediate_size=args.ffn,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, max_position_embeddings=seq,
                      rope_theta=500000.0, tie_word_embeddings=args.tied, attn_implementation="sdpa")
    torch.manual_seed(1)
    model = LlamaForCausalLM(cfg).to(dev)
    # (transformers 5 renames it; older ones have only the first name)
    if not args.no_checkpointing:
        getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, fused=dev == "cuda")
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, documents = [], False
    for s in range(args.steps):
        ids, targets, pos, mask = batch_inputs(torch, f, list(range(s * args.batch, (s + 1) * args.batch)), seq, dev)
        documents = documents or mask is not None
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = model(input_ids=ids, position_ids=pos, attention_mask=mask).logits
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if s >= min(3, args.steps - 1):
            times.append(time.perf_counter() - t0)
        del logits, loss
    ms = 1000 * statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
    print(f"torch_step_ms={ms:.1f} tokens_per_s={args.batch * seq / ms * 1000:.0f} params={params} "
          f"peak_mem_bytes={peak} attention={'documents' if documents else 'causal'} loss={loss_value(torch, model, f, seq, dev)}")


def loss_value(torch, model, f, seq, dev):
    """The loss of row 0 after training (a sanity figure for the log, not timed)."""
    import torch.nn.functional as F
    ids, targets, pos, mask = batch_inputs(torch, f, [0], seq, dev)
    with torch.no_grad(), torch.autocast(dev, dtype=torch.bfloat16):
        logits = model(input_ids=ids, position_ids=pos, attention_mask=mask).logits
        return f"{F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100).item():.4f}"


def check(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    f = h5py.File(args.data, "r")
    seq, vocab = int(f.attrs["seq_len"]), int(f.attrs["vocab_size"])
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=seq,
                      attn_implementation="sdpa")
    torch.manual_seed(1)
    model = LlamaForCausalLM(cfg).to(args.device).eval()
    rows = list(range(min(2, f["tokens"].shape[0])))
    ids, _, pos, mask = batch_inputs(torch, f, rows, seq, args.device)
    seg = torch.from_numpy(f["segment"][rows][:, :seq].astype(np.int64))
    worst, docs = 0.0, 0
    with torch.no_grad():
        packed = model(input_ids=ids, position_ids=pos, attention_mask=mask).logits
        for r in rows:
            for s in seg[r].unique():
                sel = (seg[r] == s).nonzero().flatten().to(args.device)
                alone = model(input_ids=ids[r:r + 1, sel]).logits[0]
                worst = max(worst, (alone - packed[r, sel]).abs().max().item())
                docs += 1
    ok = worst < 1e-4
    print(f"{docs} documents: worst |packed - alone| logit {worst:.2e}: {'ok' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--rows", type=int, required=True)
    d.add_argument("--seq", type=int, required=True)
    d.add_argument("--vocab", type=int, required=True)
    d.add_argument("--doc-len", type=int, default=0)
    d.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("step")
    s.add_argument("data")
    for name in ("layers", "dim", "heads", "kv_heads", "ffn", "vocab", "batch"):
        s.add_argument(name, type=int)
    s.add_argument("--tied", action="store_true")
    s.add_argument("--no-checkpointing", action="store_true",
                   help="run without gradient checkpointing (every activation kept)")
    s.add_argument("--steps", type=int, default=8)
    s.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    c = sub.add_parser("check")
    c.add_argument("data")
    c.add_argument("--device", choices=["cuda", "cpu"], default="cpu")
    args = ap.parse_args()
    if args.cmd == "data":
        if args.rows < 1 or args.seq < 1 or args.vocab < 1 or args.doc_len < 0 or 0 < args.doc_len < 2:
            ap.error("data: rows, seq and vocab must be positive, --doc-len 0 or at least 2")
        write_data(args)
    elif args.cmd == "check":
        check(args)
    else:
        step(args)


if __name__ == "__main__":
    main()
