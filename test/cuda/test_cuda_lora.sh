#!/bin/sh
# LoRA on device = "cuda" trains like on the CPU backend: the frozen base's input
# gradients, the adapters' forward and gradients (cuBLASLt GEMMs with alpha = s) and
# the adapters' optimizer give the CPU's losses (relative 1e-5) and adapters (absolute
# 1e-5) in fp32, on 1 rank at stage 0 and on 2 ranks at stage 3 over NCCL (the frozen
# base gathered, the adapters reduce-scattered), for Llama and GPT-NeoX's fused
# query_key_value, and with lora.dropout (the dropout op's masks are the CPU's bit for
# bit); the bf16 recipe, with and without dropout, follows the CPU's bf16 recipe to
# 2e-3 (losses). The fp32 dropout case steps
# with SGD (update = lr g), so the adapters compare the gradients themselves (6e-8
# apart after 4 steps): under AdamW a few elements of A's gradient 1e4 times below the
# typical one (|m| ~ 1e-9, near eps) differ by 2 % in rounding, and the normalised
# step m / (sqrt(v) + eps) makes that a 1e-4 difference of A after two steps.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 96 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
echo 'lora = { rank = 4; alpha = 8.0; };' >> s.cfg
require_cuda_device s.cfg
common="max_steps=4 global_batch_size=8 micro_batch_size=2 optimizer.lr=3e-2 save_every=4"
neox="model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true"
compare() { # TAG N EXTRA...
    tag=$1 n=$2; shift 2
    rm -rf ckc ckg
    run_ranks 1 s.cfg $common "$@" device=cpu checkpoint_dir=ckc > cpu.log 2>&1 || { cat cpu.log; fail "$tag: cpu"; }
    run_ranks $n s.cfg $common "$@" device=cuda checkpoint_dir=ckg > gpu.log 2>&1 || { cat gpu.log; fail "$tag: cuda"; }
    losses cpu.log > lc; losses gpu.log > lg
    [ "$(wc -l < lg)" -eq 4 ] || { cat gpu.log; fail "$tag: expected 4 steps"; }
    case "$*" in *bf16*) tol=2e-3 ;; *) tol=1e-5 ;; esac
    same_losses lg lc $tol || fail "$tag: losses differ from the CPU backend"
    case "$*" in *bf16*) ;; *)
        h5diff -d 1e-5 ckc/step-000004.h5 ckg/step-000004.h5 /model /model > d.log 2>&1
        grep -v "content_hash\|^1 differences found" d.log | grep -q . &&
            { head -20 d.log; fail "$tag: adapters differ from the CPU backend"; } ;;
    esac
    echo "$tag: ok"
}
compare "llama, 1 rank, stage 0" 1 zero_stage=0
compare "gpt_neox query_key_value, 1 rank" 1 $neox 'lora.targets=["query_key_value","dense"]'
compare "llama with dropout, 1 rank, SGD" 1 lora.dropout=0.1 optimizer.type=sgd optimizer.lr=1.0
compare "bf16 recipe, 1 rank" 1 precision=bf16
compare "bf16 recipe with dropout, 1 rank" 1 precision=bf16 lora.dropout=0.1
if enough_devices 2 "LoRA on 2 ranks at stage 3"; then
    compare "llama, 2 ranks, stage 3" 2 zero_stage=3
fi
# The frozen base's initial values reach the device a piece of host memory at a time
# (FTMPI_FILL_PIECE, elements; by default more than any unit here): 997-element pieces
# give bitwise the run of whole slices, through the rounding staging (bf16 recipe) and
# straight into place (fp32, stage 3).
for extra in "precision=bf16" "zero_stage=3"; do
    rm -rf ckw ckp
    run_ranks 1 s.cfg $common $extra device=cuda checkpoint_dir=ckw > w.log 2>&1 || { cat w.log; fail "$extra: whole"; }
    FTMPI_FILL_PIECE=997 run_ranks 1 s.cfg $common $extra device=cuda checkpoint_dir=ckp > p.log 2>&1 ||
        { cat p.log; fail "$extra: pieces"; }
    [ "$(losses w.log)" = "$(losses p.log)" ] && h5diff ckw/step-000004.h5 ckp/step-000004.h5 /model /model > d.log 2>&1 ||
        { head -20 d.log; fail "$extra: 997-element pieces differ from whole slices"; }
    echo "frozen base in 997-element pieces, $extra: bitwise as whole slices"
done
