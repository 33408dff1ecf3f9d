#!/bin/sh
# ftmpi-generate on device = "cuda" (KV-cached decoding: the attention_decode kernel, the
# cache appends, the prefill through the training forward) produces exactly the tokens of
# device = "cpu": greedy decoding of a trained checkpoint, single prompts and a batch of
# prompts over 2 ranks, and seeded sampling (temperature, top-k, top-p). Logits agree to
# round-off; the test needs the argmax and the sampled ids identical, which they are
# unless two logits tie to ~1e-6 (this model's are separated by far more).
# A bf16 checkpoint's working parameters (--params model) decode in bf16 on both
# devices (the trainer's bf16 block and head): the greedy tokens agree too, the
# logits now to bf16 round-off, which this trained model's margins exceed.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
GEN="$B/ftmpi-generate"
"$GENDATA" --rows 64 --seq-len 24 --digits 1 train.h5 > /dev/null || fail "gendata"
write_small_cfg s.cfg
require_cuda_device s.cfg
run_ranks 1 s.cfg max_steps=40 global_batch_size=16 micro_batch_size=16 checkpoint_dir=ck save_every=40 \
    model.max_position_embeddings=32 > train.log 2>&1 || { cat train.log; fail "training"; }
for p in "3+4=" "12+35=" "9"; do
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos ck "$p" > cpu.txt 2> cpu.err || { cat cpu.err; fail "cpu generate"; }
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos --device cuda ck "$p" > gpu.txt 2> gpu.err || { cat gpu.err; fail "cuda generate"; }
    cmp -s cpu.txt gpu.txt || { echo "cpu: $(cat cpu.txt)"; echo "cuda: $(cat gpu.txt)"; fail "greedy '$p' differs"; }
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos --temperature 0.8 --top-k 20 --top-p 0.9 --seed 5 ck "$p" > cpu.txt 2> cpu.err || fail "cpu sample"
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos --temperature 0.8 --top-k 20 --top-p 0.9 --seed 5 --device cuda ck "$p" > gpu.txt 2> gpu.err || { cat gpu.err; fail "cuda sample"; }
    cmp -s cpu.txt gpu.txt || { echo "cpu: $(cat cpu.txt)"; echo "cuda: $(cat gpu.txt)"; fail "sampled '$p' differs"; }
done
run_ranks 1 s.cfg max_steps=40 global_batch_size=16 micro_batch_size=16 checkpoint_dir=ckb save_every=40 \
    model.max_position_embeddings=32 precision=bf16 > trainb.log 2>&1 || { cat trainb.log; fail "bf16 training"; }
for p in "3+4=" "12+35="; do
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos --params model ckb "$p" > cpu.txt 2> cpu.err || { cat cpu.err; fail "cpu bf16 generate"; }
    "$GEN" --byte-tokens --max-new-tokens 12 --ignore-eos --params model --device cuda ckb "$p" > gpu.txt 2> gpu.err || { cat gpu.err; fail "cuda bf16 generate"; }
    cmp -s cpu.txt gpu.txt || { echo "cpu: $(cat cpu.txt)"; echo "cuda: $(cat gpu.txt)"; fail "bf16 greedy '$p' differs"; }
done
if have_mpirun && enough_devices 2 "a batch of prompts over 2 ranks"; then
    for i in 1 2 3 4 5; do echo "{\"prompt\": \"$i+$i=\"}"; done > prompts.jsonl
    "$GEN" --byte-tokens --max-new-tokens 6 --prompts prompts.jsonl --out cpu.jsonl ck 2> cpu.err || { cat cpu.err; fail "cpu batch"; }
    "$MPIRUN" --oversubscribe -np 2 "$GEN" --byte-tokens --max-new-tokens 6 --device cuda --prompts prompts.jsonl --out gpu.jsonl ck 2> gpu.err ||
        { cat gpu.err; fail "cuda batch on 2 ranks"; }
    cmp -s cpu.jsonl gpu.jsonl || { diff cpu.jsonl gpu.jsonl; fail "batch output differs"; }
fi
echo "ftmpi-generate: device = cuda equals device = cpu"
