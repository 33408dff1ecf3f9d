#!/bin/sh
# Pre-emption: SIGUSR1 to a running job makes every rank finish its step, write a
# checkpoint and exit 85; the restarted job (resume = "auto") finishes with exactly the
# final loss and weights of an uninterrupted run. A second signal exits at once (86)
# and leaves the last good checkpoint in place.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 256 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
n=1; have_mpirun && n=2
common="max_steps=40 global_batch_size=8 micro_batch_size=2 log_every=1 checkpoint_dir=ck resume=auto"
run_ranks $n s.cfg max_steps=40 global_batch_size=8 micro_batch_size=2 final_weights=ref.h5 > ref.log 2>&1 || { cat ref.log; fail "reference"; }

# wait_steps LOG N: until the log shows step N (or 60 s)
wait_steps() { i=0; while [ $i -lt 600 ]; do grep -q "^step *$2/" "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }

start_ranks $n s.cfg $common final_weights=out.h5 > a.log 2>&1; pid=$!
wait_steps a.log 5 || { kill -9 $pid; cat a.log; fail "run did not start"; }
kill -USR1 $pid
wait $pid; rc=$?
[ $rc -eq 85 ] || { cat a.log; fail "exit code $rc after SIGUSR1, expected 85"; }
grep -q "stop signal: checkpointed after step" a.log || { cat a.log; fail "no checkpoint message"; }
stopped=$(sed -n 's/.*stop signal: checkpointed after step \([0-9]*\).*/\1/p' a.log)
[ "$(cat ck/latest)" = "$(printf 'step-%06d.h5' "$stopped")" ] || fail "latest is not the signal checkpoint"
run_ranks $n s.cfg $common final_weights=out.h5 > b.log 2>&1 || { cat b.log; fail "resumed run"; }
grep -q "resumed from ck/step-.* at step $stopped" b.log || { cat b.log; fail "did not resume at $stopped"; }
[ "$(losses ref.log | tail -n 1)" = "$(losses b.log | tail -n 1)" ] || fail "final loss differs from the uninterrupted run"
h5diff ref.h5 out.h5 /model /model >/dev/null || fail "final weights differ from the uninterrupted run"
echo "SIGUSR1 at step $stopped: exit 85, resumed, final loss and weights identical"

# a second signal while the signal's checkpoint is being written (FTMPI_FAULT=ckpt:slow
# stalls each write for 4 s after its model tensors): immediate exit 86, the unfinished
# checkpoint stays a .tmp and the last good one is untouched and loads
rm -rf ck
run_ranks 1 s.cfg $common max_steps=2 > c0.log 2>&1 || { cat c0.log; fail "first checkpoint"; }
good=$(cat ck/latest)
FTMPI_FAULT=ckpt:slow start_ranks $n s.cfg $common max_steps=400 > c.log 2>&1; pid=$!
wait_steps c.log 5 || { kill -9 $pid; fail "second run did not start"; }
kill -USR1 $pid; sleep 2.5; kill -USR1 $pid
wait $pid; rc=$?
[ $rc -eq 86 ] || { cat c.log; fail "exit code $rc after a second signal, expected 86"; }
[ "$(cat ck/latest)" = "$good" ] || fail "latest moved to $(cat ck/latest)"
run_ranks $n s.cfg $common max_steps=3 resume="ck/$good" > d.log 2>&1 || { cat d.log; fail "last good checkpoint unreadable"; }
echo "second signal during the checkpoint: exit 86, latest still $good and it loads"
