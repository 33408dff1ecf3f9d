#!/bin/sh
# A non-finite gradient (injected at step 3 with FTMPI_FAULT=nan:3) is skipped when
# max_nan_skips allows it: no update, training goes on, and no checkpoint holds a NaN;
# with the default (0) the run aborts with a clear line, and the checkpoint written
# before the bad step is intact and NaN-free.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="max_steps=6 global_batch_size=4 micro_batch_size=2 checkpoint_dir=ck save_every=2"
# h5dump prints non-finite floats as nan/inf; whole words only (the stored config text
# mentions max_nan_skips)
no_nans() { ! h5dump "$1" | grep -Eiqw "nan|-nan|inf|-inf"; }
FTMPI_FAULT=nan:3 run_ranks 1 s.cfg $common max_nan_skips=1 > a.log 2>&1 || { cat a.log; fail "skip run"; }
grep -q "step 3: .*not finite, update skipped (1 of max_nan_skips 1)" a.log || { cat a.log; fail "no skip message"; }
[ "$(losses a.log | wc -l)" -eq 6 ] || fail "did not finish 6 steps"
for f in ck/step-*.h5; do no_nans "$f" || fail "$f contains NaN"; done
echo "skipped: ok, checkpoints NaN-free"
rm -rf ck
FTMPI_FAULT=nan:3 run_ranks 1 s.cfg $common > b.log 2>&1 && { cat b.log; fail "default should abort"; }
grep -q "step 3: loss .* is not finite (1 skipped steps, max_nan_skips 0)" b.log || { cat b.log; fail "unclear abort"; }
[ "$(cat ck/latest)" = "step-000002.h5" ] || fail "latest should stay at step 2"
no_nans ck/step-000002.h5 || fail "checkpoint has NaN"
echo "aborted at the NaN: ok, step-2 checkpoint NaN-free"
