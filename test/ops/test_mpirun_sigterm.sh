#!/bin/sh
# SIGTERM to mpirun itself (a user's kill, Slurm pre-emption without --signal): the ranks
# checkpoint and exit 85, but Open MPI's mpirun exits 1 whatever they returned. Rank 0
# also records 85 in checkpoint_dir/.ftmpi-exit for the launch named by FTMPI_RUN_ID,
# and `ftmpi --exit-status DIR` (what jobs/*.slurm run after the launcher) gives it back:
#  - for this launch, 85, and the checkpoint is `latest` and resumes;
#  - never for another launch's FTMPI_RUN_ID;
#  - never after a later run took the directory (it removes the record at start-up), so a
#    run that then fails for another reason keeps its own exit code.
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 256 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=8 micro_batch_size=2 log_every=1 checkpoint_dir=ck resume=auto"
wait_steps() { i=0; while [ $i -lt 600 ]; do grep -q "^step *$2/" "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }

export FTMPI_RUN_ID=launch-1
start_ranks 2 s.cfg $common max_steps=400 > a.log 2>&1; pid=$!
wait_steps a.log 3 || { kill -9 $pid; cat a.log; fail "run did not start"; }
kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 85 ] || [ $rc -eq 1 ] || { cat a.log; fail "mpirun exited $rc after SIGTERM"; }
# The record and the checkpoint are what count: mpirun passes the signal on to the ranks a
# second after it got it and may stop reading their output meanwhile, so their last log
# lines can be lost (rank 0 must not block on that output: src/train/signals.c).
rec=$("$FTMPI" --exit-status ck) || { cat a.log; ls -la ck; fail "the ranks did not checkpoint and record 85 on SIGTERM (mpirun exited $rc)"; }
[ "$rec" = 85 ] || fail "recorded $rec, not 85"
stopped=$(sed -n 's/^step \([0-9]*\)$/\1/p' ck/.ftmpi-exit)
logged=$(sed -n 's/.*stop signal: checkpointed after step \([0-9]*\).*/\1/p' a.log)
[ -z "$logged" ] || [ "$logged" = "$stopped" ] || fail "the log says step $logged, the record step $stopped"
[ "$(cat ck/latest)" = "$(printf 'step-%06d.h5' "$stopped")" ] || fail "latest is not the signal checkpoint"
echo "SIGTERM to mpirun: mpirun exited $rc, the launch's record says 85 (step $stopped)"
FTMPI_RUN_ID=launch-2 "$FTMPI" --exit-status ck > other.out && fail "launch-2 took launch-1's record"
FTMPI_RUN_ID= "$FTMPI" --exit-status ck > other.out && fail "a launch without FTMPI_RUN_ID took a record"
"$FTMPI" --exit-status > usage.out 2>&1; [ $? -eq 2 ] || fail "--exit-status without a directory: not a usage error"

# the next run resumes from that checkpoint, and its start removes the record
export FTMPI_RUN_ID=launch-3
run_ranks 2 s.cfg $common max_steps=$((stopped + 1)) > b.log 2>&1 || { cat b.log; fail "resumed run"; }
grep -q "resumed from ck/step-.* at step $stopped" b.log || { cat b.log; fail "did not resume at $stopped"; }
FTMPI_RUN_ID=launch-1 "$FTMPI" --exit-status ck > stale.out && fail "launch-1's record survived a later run"

# a record planted for a launch that then fails for another reason (a non-finite
# gradient with max_nan_skips = 0): gone at its start, so its own code stands
printf 'ftmpi-exit 1\nrun launch-4\ncode 85\nstep 1\n' > ck/.ftmpi-exit
export FTMPI_RUN_ID=launch-4
FTMPI_FAULT=nan:$((stopped + 2)) run_ranks 2 s.cfg $common max_steps=$((stopped + 3)) > c.log 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 85 ] || { cat c.log; fail "the failing run exited $rc"; }
"$FTMPI" --exit-status ck > failed.out && fail "a failed run's launch found an exit record: $(cat failed.out)"
echo "records are per launch and removed by the next run; a failure keeps its code ($rc)"
