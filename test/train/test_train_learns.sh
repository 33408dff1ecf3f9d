#!/bin/sh
# The trainer learns: on the synthetic addition data the answer-token loss falls by
# more than half within 40 steps, eval loss and perplexity are printed and consistent
# (ppl = exp(loss)), and --eval-only on the trained-from-scratch init reports the same
# numbers from any number of ranks.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 256 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 40 --seq-len 32 --digits 2 --seed 9 eval.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
run_ranks 1 small.cfg max_steps=40 log_every=5 data.eval=eval.h5 eval_every=20 > run.log 2>&1 ||
    { cat run.log; fail "training run"; }
losses run.log > l
first=$(head -n 1 l); last=$(tail -n 1 l)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }' ||
    { cat run.log; fail "loss did not halve: $first -> $last"; }
grep -q "^eval .*ppl" run.log || fail "no eval line"
sed -n 's/^eval .*| loss \([0-9.]*\) | ppl \([0-9.]*\) .*/\1 \2/p' run.log |
    awk '{ e = exp($1); if ((e - $2) / $2 > 1e-3 || ($2 - e) / $2 > 1e-3) exit 1 }' ||
    fail "perplexity is not exp(loss)"
# eval-only: same mean loss from 1 and 2 ranks (rows split differently)
run_ranks 1 --eval-only small.cfg data.eval=eval.h5 > e1.log 2>&1 || { cat e1.log; fail "eval-only"; }
grep -q "^eval eval.h5 | loss" e1.log || { cat e1.log; fail "eval-only output"; }
if have_mpirun; then
    run_ranks 2 --eval-only small.cfg data.eval=eval.h5 > e2.log 2>&1 || { cat e2.log; fail "eval-only 2 ranks"; }
    l1=$(sed -n 's/.*| loss \([0-9.]*\) .*/\1/p' e1.log); l2=$(sed -n 's/.*| loss \([0-9.]*\) .*/\1/p' e2.log)
    awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-5 * a) }' ||
        fail "eval-only differs between 1 and 2 ranks: $l1 vs $l2"
fi
echo "loss $first -> $last"
