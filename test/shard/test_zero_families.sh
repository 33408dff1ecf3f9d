#!/bin/sh
# The model families under the sharding engine: for Qwen2 (q/k/v biases, tied head),
# Qwen3 (q/k norms, head_dim 24 != 64/4), Mistral (sliding window of 5 on packed
# rows), GPT-NeoX (LayerNorm, GELU, biases, partial rotary, parallel residual) and GPT-J
# (shared norm, interleaved partial rotary, lm_head bias), ZeRO stages 0-3 on 2 and 3 ranks (3: every unit padded) give the per-step
# losses of the 1-rank stage-0 run to relative 2e-5 and its final weights to absolute
# 1e-4, the tolerances of test_zero_equivalence.sh (which covers Llama on 1-4 ranks).
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
common="max_steps=3 global_batch_size=12 micro_batch_size=2 optimizer.warmup_steps=1"
for family in "model.family=qwen2 model.tie_word_embeddings=true" \
              "model.family=qwen3 model.head_dim=24" \
              "model.family=mistral model.sliding_window=5" \
              "model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true" \
              "model.family=gptj model.num_key_value_heads=4 model.rotary_dim=8 model.gelu_tanh=true"; do
    name=${family%% *}
    run_ranks 1 small.cfg $common $family zero_stage=0 final_weights=ref.h5 > ref.log 2>&1 ||
        { cat ref.log; fail "$name: reference run"; }
    losses ref.log > lref
    [ "$(wc -l < lref)" -eq 3 ] || fail "$name: reference: expected 3 steps"
    for stage in 0 1 2 3; do
        for n in 2 3; do
            tag="$name, stage $stage, $n ranks"
            run_ranks $n small.cfg $common $family zero_stage=$stage final_weights=w.h5 \
                > run.log 2>&1 || { cat run.log; fail "$tag: run"; }
            losses run.log > l
            same_losses l lref 2e-5 || fail "$tag: losses differ from 1 rank"
            h5diff -d 1e-4 ref.h5 w.h5 /model /model > diff.log 2>&1 ||
                { head -20 diff.log; fail "$tag: final weights differ from 1 rank"; }
            echo "$tag: ok"
        done
    done
done
