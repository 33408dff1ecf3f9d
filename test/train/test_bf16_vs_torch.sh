#!/bin/sh
# The bf16 mixed-precision recipe against PyTorch's (test/reference/gen_bf16_training.py):
# 60 AdamW steps of a tiny Llama from the same initial weights on the same batch of
# 128 rows, in fp32 and in bf16.
#
# Tolerances, from the golden file itself:
#  - precision = "fp32" against PyTorch fp32: every step to relative 1e-5 (3e-7 seen):
#    the same fp32 arithmetic up to summation order.
#  - precision = "bf16" against PyTorch's bf16 recipe: the file holds three equally
#    valid PyTorch bf16 runs (eager attention, which rounds the scores to bf16 before
#    the softmax; SDPA, which does not; and 4 accumulated micro-batches). At every step
#    ftmpi must be within three times their largest relative spread (0.11 % over the 60
#    steps) of their mean: ftmpi rounds once per op where PyTorch rounds after every
#    operation, so it is one more valid member of that family, not a copy of one. The
#    final loss within 1 % of theirs, as issue #12 asks; ftmpi with 4 accumulated
#    micro-batches too. Why three: over steps 1-50 ftmpi stays within 1.1-1.6e-4 of
#    their mean, but from step 52 the loss oscillates (the runs' own spread jumps 50x)
#    and where a run's swings fall is rounding noise: two builds of the same code
#    (2026-11-28, the head's logits in bf16) peaked at 0.72x and 2.08x that spread,
#    the code before at 1.26x, so twice it was a coin toss, not a check.
#  - bf16 must be in effect: ftmpi's bf16 trajectory differs from its fp32 one.
. "$(dirname "$0")/lib.sh"
golden="$S/test/data/hf/hf_bf16_train.h5"
command -v h5dump >/dev/null 2>&1 || skip "h5dump not found"
"$B/test/train/hf_batch_to_dataset" "$golden" batch.h5 || fail "converting the batch"
column() { # NAME -> the golden's per-step losses, one per line
    h5dump -m '%.12g' -d "/expected/train/$1" "$golden" |
        sed -n 's/^ *([0-9]*): //p' | tr ',' '\n' | sed 's/ //g; /^$/d'
}
column loss_fp32 > t32
column loss_bf16 > e1; column loss_bf16_sdpa > e2; column loss_bf16_accum > e3
[ "$(wc -l < e1)" -eq 60 ] || fail "the golden file holds $(wc -l < e1) bf16 losses, not 60"
paste e1 e2 e3 | awk '{ print ($1 + $2 + $3) / 3 }' > t16   # the ensemble's mean
spread=$(paste e1 e2 e3 | awk '{ lo = $1; hi = $1; for (i = 2; i <= 3; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
                                 r = (hi - lo) / lo; if (r > m) m = r } END { printf "%.6f", m }')

run() { # PRECISION [MICRO] -> ftmpi's per-step losses in losses.PRECISION[.MICRO]
    tag=$1${2:+.$2}
    cat > w.cfg <<CFG
max_steps = 60; micro_batch_size = ${2:-128}; global_batch_size = 128; grad_clip = 1.0;
precision = "$1"; metrics_file = "m.$tag.jsonl";
model = { weights = "$golden"; };
data = { train = "batch.h5"; };
optimizer = { lr = 1e-3; min_lr = 1e-3; schedule = "constant"; warmup_steps = 0;
              beta1 = 0.9; beta2 = 0.95; eps = 1e-8; weight_decay = 0.1; };
CFG
    run_ranks 1 w.cfg > "run.$tag.log" 2>&1 || { cat "run.$tag.log"; fail "precision $tag run"; }
    sed -n 's/.*"kind":"step".*"loss":\([0-9.eE+-]*\),.*/\1/p' "m.$tag.jsonl" > "losses.$tag"
    [ "$(wc -l < "losses.$tag")" -eq 60 ] || { cat "m.$tag.jsonl"; fail "precision $tag: no 60 losses"; }
}
run fp32
run bf16
run bf16 32

same_losses losses.fp32 t32 1e-5 || fail "fp32 drifts from PyTorch fp32"
echo "fp32: 60 steps within 1e-5 of PyTorch fp32"
tol=$(awk -v s="$spread" 'BEGIN { printf "%.6f", 3 * s }')
for run in bf16 bf16.32; do
    same_losses losses.$run t16 "$tol" || fail "$run drifts from PyTorch's bf16 recipe by more than $tol"
    final=$(paste losses.$run t16 | tail -n 1 | awk '{ d = $1 - $2; if (d < 0) d = -d; printf "%.5f", d / $2 }')
    awk -v f="$final" 'BEGIN { exit !(f <= 0.01) }' || fail "$run final loss off by $final (> 1 %)"
    echo "$run: 60 steps within $tol of PyTorch's bf16 runs (their spread $spread), final loss off by $final"
done
if same_losses losses.bf16 losses.fp32 1e-6 > /dev/null; then
    fail "the bf16 run reproduces the fp32 one: bf16 is not in effect"
fi
paste losses.bf16 t16 losses.fp32 | awk 'NR % 10 == 0 { printf "step %2d: ftmpi bf16 %.5f  torch bf16 %.5f  ftmpi fp32 %.5f\n", NR, $1, $2, $3 }'
