#!/usr/bin/env python3
"""PyTorch + HF peer for bench/gpu_step.sh: one training step (forward, backward, AdamW,
zero_grad) of a randomly initialised LlamaForCausalLM on the GPU, bf16 autocast over fp32
master weights (the recipe ftmpi's bf16 mode follows), SDPA attention, gradient
checkpointing, random tokens. Prints one line:
    torch_step_ms=... tokens_per_s=... params=...
Usage: gpu_step_torch.py LAYERS DIM HEADS KV_HEADS FFN VOCAB SEQ BATCH [--tied]
A reference peer for measurements, never a run-time dependency."""
import statistics
import sys
import time


def main():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    if not torch.cuda.is_available():
        print("no GPU")
        sys.exit(77)
    layers, dim, heads, kv, ffn, vocab, seq, batch = (int(x) for x in sys.argv[1:9])
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=ffn,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, max_position_embeddings=seq,
                      tie_word_embeddings="--tied" in sys.argv, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).cuda()
    model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.1, fused=True)
    ids = torch.randint(0, vocab, (batch, seq), device="cuda")
    times = []
    for step in range(8):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    ms = 1000 * statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    print(f"torch_step_ms={ms:.1f} tokens_per_s={batch * seq / ms * 1000:.0f} params={params}")


if __name__ == "__main__":
    main()
