#!/bin/sh
# LoRA training end to end on the CPU backend (the block's math is test_lora's, the
# agreement with PEFT test_lora_peft's):
#  - the adapters learn and the frozen base does not move (the checkpoint holds the
#    adapters only, /lora says what they are);
#  - ZeRO stages 0-3 on 1, 2 and 3 ranks give the losses and adapter weights of 1 rank
#    (fp32 round-off; the bf16 recipe to its own resolution);
#  - with lora.dropout the masks follow the samples (model/lora.h): 3 ranks at stage 3
#    still give the losses and adapters of 1 rank, and the losses differ from no dropout;
#  - resume is bitwise (losses, adapters and their AdamW state), for Llama, Qwen2,
#    GPT-NeoX's fused query_key_value, and Llama with dropout;
#  - a LoRA checkpoint does not resume a full run, nor adapters of another rank (from a
#    checkpoint or a PEFT directory in model.adapter): one line, exit 2.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
cat >> s.cfg <<CFG
lora = { rank = 4; alpha = 8.0; };
CFG
common="global_batch_size=12 micro_batch_size=2 max_steps=8 optimizer.lr=3e-2"

# 1 rank: the reference, and what a LoRA run is
run_ranks 1 s.cfg $common checkpoint_dir=ck1 > r1.log 2>&1 || { cat r1.log; fail "1 rank"; }
grep -q "LoRA rank 4, alpha 8 (scale 2) on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj" r1.log ||
    { cat r1.log; fail "no LoRA start-up line"; }
losses r1.log > l1
[ "$(wc -l < l1)" -eq 8 ] || fail "expected 8 step lines"
awk 'NR == 1 { a = $1 } END { if (!($1 < a - 0.05)) { print "first " a ", last " $1; exit 1 } }' l1 ||
    fail "the adapters did not learn"
h5ls -r ck1/step-000008.h5/model > m.ls || fail "h5ls"
grep -q "model.layers.1.mlp.down_proj.lora_B.weight Dataset {64, 4}" m.ls || { cat m.ls; fail "adapter tensors"; }
grep -q "embed_tokens\|q_proj.weight" m.ls && { cat m.ls; fail "the checkpoint holds base tensors"; }
h5dump -a /lora/targets ck1/step-000008.h5 | grep -q '"q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"' ||
    fail "/lora targets"

have_mpirun || skip "mpirun not found (the 1-rank case passed)"
for run in "2 zero_stage=0" "2 zero_stage=1" "2 zero_stage=2" "3 zero_stage=3" "2 zero_stage=3 offload_optimizer=true"; do
    set -- $run
    n=$1; shift
    rm -rf ckn
    run_ranks $n s.cfg $common "$@" checkpoint_dir=ckn > rn.log 2>&1 || { cat rn.log; fail "$n ranks $*"; }
    losses rn.log > ln
    same_losses ln l1 2e-5 || fail "$n ranks $*: losses differ from 1 rank"
    # the values to 2e-6 absolute (|A| ~ 0.1; each content_hash attribute differs, as bits do)
    h5diff -d 2e-6 ck1/step-000008.h5 ckn/step-000008.h5 /model /model > d.log 2>&1
    grep -v "content_hash\|^1 differences found" d.log | grep -q . &&
        { head -20 d.log; fail "$n ranks $*: adapters differ from 1 rank"; }
    echo "$n ranks $*: losses and adapters agree with 1 rank"
done
run_ranks 1 s.cfg $common precision=bf16 > b1.log 2>&1 || { cat b1.log; fail "bf16 1 rank"; }
run_ranks 3 s.cfg $common precision=bf16 zero_stage=3 > b3.log 2>&1 || { cat b3.log; fail "bf16 3 ranks"; }
losses b1.log > lb1; losses b3.log > lb3
same_losses lb3 lb1 2e-3 || fail "bf16 recipe: 3 ranks at stage 3 differ from 1 rank"

# dropout: N ranks = 1 rank, since a sample's masks do not depend on who trains it
run_ranks 1 s.cfg $common lora.dropout=0.1 checkpoint_dir=ckd1 > d1.log 2>&1 || { cat d1.log; fail "dropout, 1 rank"; }
losses d1.log > ld1
[ "$(wc -l < ld1)" -eq 8 ] || fail "dropout: expected 8 step lines"
cmp -s ld1 l1 && fail "lora.dropout = 0.1 trained exactly like no dropout"
h5dump -a /lora/dropout ckd1/step-000008.h5 | grep -q "0.1" || fail "/lora dropout"
run_ranks 3 s.cfg $common lora.dropout=0.1 zero_stage=3 checkpoint_dir=ckd3 > d3.log 2>&1 ||
    { cat d3.log; fail "dropout, 3 ranks"; }
losses d3.log > ld3
same_losses ld3 ld1 2e-5 || fail "dropout: 3 ranks at stage 3 differ from 1 rank"
h5diff -d 2e-6 ckd1/step-000008.h5 ckd3/step-000008.h5 /model /model > d.log 2>&1
grep -v "content_hash\|^1 differences found" d.log | grep -q . &&
    { head -20 d.log; fail "dropout: adapters of 3 ranks differ from 1 rank"; }
echo "dropout: 3 ranks at stage 3 agree with 1 rank"

# bitwise resume
resume() { # N EXTRA...
    n=$1; shift
    rm -rf cka ckb
    run_ranks $n s.cfg $common "$@" checkpoint_dir=cka > a.log 2>&1 || { cat a.log; fail "$n ranks $*: straight"; }
    FTMPI_FAULT=ckpt:saved run_ranks $n s.cfg $common "$@" save_every=4 checkpoint_dir=ckb > b.log 2>&1 &&
        { cat b.log; fail "$n ranks $*: not killed after its checkpoint"; }
    run_ranks $n s.cfg $common "$@" checkpoint_dir=ckb resume=auto > c.log 2>&1 ||
        { cat c.log; fail "$n ranks $*: resumed run"; }
    grep -q "resumed from ckb/step-000004.h5 at step 4" c.log || { cat c.log; fail "did not resume"; }
    losses a.log | tail -n 4 > la; losses c.log > lc
    cmp -s la lc || { paste la lc; fail "$n ranks $*: losses after resume differ"; }
    for g in /model /optim/m /optim/v; do
        h5diff cka/step-000008.h5 ckb/step-000008.h5 $g $g > d.log 2>&1 ||
            { head d.log; fail "$n ranks $*: $g differs after resume"; }
    done
    echo "$n ranks $*: bitwise identical after resume"
}
resume 2 zero_stage=3
resume 3 zero_stage=1 model.family=qwen2
resume 2 zero_stage=3 lora.dropout=0.2
resume 2 zero_stage=2 model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true 'lora.targets=["query_key_value","dense_4h_to_h"]'

# a checkpoint of 2 ranks at stage 3 resumes on 3 ranks at stage 1 (and 1 rank at
# stage 0): the continued losses are the 1-rank run's (fp32 round-off)
rm -rf ckr
FTMPI_FAULT=ckpt:saved run_ranks 2 s.cfg $common zero_stage=3 save_every=4 checkpoint_dir=ckr > b.log 2>&1 &&
    { cat b.log; fail "reshard: not killed after its checkpoint"; }
for run in "3 zero_stage=1" "1 zero_stage=0"; do
    set -- $run
    n=$1; shift
    run_ranks $n s.cfg $common "$@" checkpoint_dir=ckr resume=auto save_every=100 > c.log 2>&1 ||
        { cat c.log; fail "reshard: resumed on $n ranks $*"; }
    losses c.log > lc; tail -n 4 l1 > l1t
    same_losses lc l1t 2e-5 || fail "reshard: $n ranks $* after 2 ranks at stage 3 leave the 1-rank losses"
    rm -f ckr/step-000008.h5; echo "step-000004.h5" > ckr/latest
done
echo "a 2-rank stage-3 LoRA checkpoint resumes on 3 ranks at stage 1 and on 1 rank"

# wrong resumes: one line each, exit 2
run_ranks 1 s.cfg $common lora.rank=0 checkpoint_dir=ck1 resume=auto > w.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "a LoRA checkpoint (rank 4 adapters on q_proj" w.log ||
    { cat w.log; fail "a LoRA checkpoint resumed a full run (exit $rc)"; }
run_ranks 1 s.cfg $common lora.rank=8 checkpoint_dir=ck1 resume=auto > w.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "adapters of rank 4, alpha 8 on .*this run's lora group asks for rank 8" w.log ||
    { cat w.log; fail "adapters of another rank resumed (exit $rc)"; }
# nor a PEFT directory of another rank (model.adapter, typed with a trailing slash: the
# line names its adapter_config.json with one slash)
"$B/ftmpi-convert" export -q --adapter ck1/step-000008.h5 ad > x.log 2>&1 || { cat x.log; fail "export --adapter"; }
run_ranks 1 s.cfg $common lora.rank=8 model.adapter=ad/ > w.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^ftmpi: command line: model.adapter=ad/: ad/adapter_config.json: r 4, lora_alpha 8, target_modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; the run's lora group has rank 8, alpha 8, targets .*: set the lora group to the adapter's$" w.log ||
    { cat w.log; fail "a PEFT directory of another rank (exit $rc)"; }
echo "LoRA trains alike on 1-3 ranks at every stage and resumes bitwise"
