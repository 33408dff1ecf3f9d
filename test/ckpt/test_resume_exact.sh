#!/bin/sh
# Invariant 2: resume is exact. 2k steps straight == the same job killed right after
# its step-k checkpoint (FTMPI_FAULT=ckpt:saved), restarted with resume = "auto", bitwise: the same loss lines and identical final
# weights, for 1 and 4 ranks at ZeRO stage 3, with accumulation (4 and 1 micro-batches)
# and a non-constant (warmup + cosine) schedule; also bf16 parameters at stage 1 on 2
# ranks, stage 0 (replicated optimizer state) on 2 ranks and stage 2 on 3 ranks; and
# Qwen2, Qwen3, Mistral, GPT-NeoX and GPT-J (bf16 recipe) models on 2 ranks.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 128 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=8 micro_batch_size=2 zero_stage=3 optimizer.warmup_steps=2 optimizer.schedule=cosine"
check() { # N EXTRA...
    n=$1; shift
    rm -rf ck straight.h5 resumed.h5
    run_ranks $n s.cfg $common "$@" max_steps=8 final_weights=straight.h5 > a.log 2>&1 || { cat a.log; fail "$n ranks: straight run"; }
    FTMPI_FAULT=ckpt:saved run_ranks $n s.cfg $common "$@" max_steps=8 save_every=4 checkpoint_dir=ck > b.log 2>&1 &&
        { cat b.log; fail "$n ranks: the job was not killed after its checkpoint"; }
    [ "$(cat ck/latest)" = "step-000004.h5" ] || fail "latest does not point at step 4"
    run_ranks $n s.cfg $common "$@" max_steps=8 checkpoint_dir=ck resume=auto final_weights=resumed.h5 > c.log 2>&1 ||
        { cat c.log; fail "$n ranks: resumed run"; }
    grep -q "resumed from ck/step-000004.h5 at step 4" c.log || { cat c.log; fail "did not resume"; }
    losses a.log | tail -n 4 > la; losses c.log > lc
    cmp -s la lc || { paste la lc; fail "$n ranks $*: losses after resume differ"; }
    h5diff straight.h5 resumed.h5 /model /model > d.log 2>&1 || { head d.log; fail "$n ranks $*: weights differ"; }
    echo "$n ranks $*: bitwise identical after resume"
}
check 1
have_mpirun || skip "mpirun not found (1-rank case passed)"
check 4
check 2 model.param_dtype=bf16 zero_stage=1
check 2 zero_stage=0
check 3 zero_stage=2 global_batch_size=6
# the families: q/k/v biases (tied head), q/k norms with bf16 parameters, a sliding window
check 2 model.family=qwen2 model.tie_word_embeddings=true
check 2 model.family=qwen3 model.head_dim=24 model.param_dtype=bf16
check 2 model.family=mistral model.sliding_window=5 zero_stage=1
check 2 model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true
check 2 model.family=gptj model.num_key_value_heads=4 model.rotary_dim=8 model.gelu_tanh=true precision=bf16
# the bf16 recipe (bf16 working weights made from the fp32 master, bf16 activations)
check 1 precision=bf16 zero_stage=0
check 2 precision=bf16
check 2 precision=bf16 zero_stage=2 grad_reduce_dtype=bf16
# A checkpoint holds the fp32 master whatever the recipe, so a bf16 run resumes in fp32
# and the reverse; the continued run follows the straight run of the recipe it was
# saved in to within the recipes' own distance (2 %), and is not a fresh start.
cross() { # FROM TO
    rm -rf ck
    run_ranks 2 s.cfg $common precision=$1 max_steps=8 > a.log 2>&1 || { cat a.log; fail "$1 straight"; }
    FTMPI_FAULT=ckpt:saved run_ranks 2 s.cfg $common precision=$1 max_steps=8 save_every=4 checkpoint_dir=ck > b.log 2>&1 &&
        { cat b.log; fail "$1 run not killed after its checkpoint"; }
    run_ranks 2 s.cfg $common precision=$2 max_steps=8 checkpoint_dir=ck resume=auto > c.log 2>&1 ||
        { cat c.log; fail "$1 checkpoint resumed as $2"; }
    grep -q "resumed from ck/step-000004.h5 at step 4" c.log || { cat c.log; fail "$1 -> $2 did not resume"; }
    losses a.log | tail -n 4 > la; losses c.log > lc
    same_losses lc la 2e-2 || fail "$1 checkpoint resumed as $2 leaves the trajectory"
    echo "a $1 checkpoint resumes as $2 (losses within 2 % of the straight $1 run)"
}
cross bf16 fp32
cross fp32 bf16
