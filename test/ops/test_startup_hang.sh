#!/bin/sh
# The watchdog covers start-up and loading, and a long evaluation is not a hang:
# - a rank stopped while the ranks open the training data together, or while they load
#   the resume checkpoint (test hook FTMPI_FAULT=stop:<rank>:<phase>), ends the job
#   with exit 87, the phase named and rank 1 named as the one missing (roll call),
#   within comm_timeout (not a wait forever);
# - an evaluation far longer than comm_timeout completes (progress per batch).
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 comm_timeout=3"
hang_case() { # PHASE-PREFIX PATTERN ARGS...
    phase=$1 pat=$2; shift 2
    t0=$(date +%s)
    FTMPI_FAULT="stop:1:$phase" run_ranks 2 s.cfg $common "$@" > h.log 2>&1
    rc=$? took=$(( $(date +%s) - t0 ))
    [ $rc -eq 87 ] || { cat h.log; fail "$phase: exit $rc, not 87"; }
    [ $took -le 20 ] || fail "$phase: took $took s (comm_timeout 3)"
    grep -q "no progress for [0-9]* s while $pat" h.log || { cat h.log; fail "$phase: phase not named"; }
    # the rank that is alive names the one that is missing (the watchdog's roll call)
    grep -q "^ftmpi: rank 0 .*: rank 1 did not answer the roll call" h.log ||
        { cat h.log; fail "$phase: the missing rank is not named"; }
    echo "rank 1 stopped while $phase: exit 87 in $took s"
}
hang_case opening "opening model.weights and data.train" max_steps=1
run_ranks 1 s.cfg $common max_steps=1 checkpoint_dir=ck > c.log 2>&1 || { cat c.log; fail "checkpoint"; }
hang_case loading "loading the resume checkpoint" max_steps=2 checkpoint_dir=ck resume=auto

# an evaluation of many batches, far longer than comm_timeout = 1 s, is progress
"$GENDATA" --rows 400 --seq-len 32 --digits 2 eval.h5 >/dev/null || fail "gendata eval"
t0=$(date +%s)
run_ranks 2 --eval-only s.cfg global_batch_size=4 micro_batch_size=1 comm_timeout=1 \
    data.eval=eval.h5 eval_batches=0 > e.log 2>&1 || { cat e.log; fail "a long evaluation was taken for a hang"; }
took=$(( $(date +%s) - t0 ))
grep -q "^eval eval.h5 | loss" e.log || { cat e.log; fail "no eval line"; }
echo "evaluation of 400 rows in $took s with comm_timeout 1: completed"
