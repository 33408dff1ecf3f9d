#!/bin/sh
# A rank that dies (SIGKILL) or hangs (SIGSTOP) mid-run ends every rank within
# comm_timeout (+ launcher slack) with a message naming a rank and host — never a
# silent hang.
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 256 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
sed -i 's/^seed = 7;/seed = 7; # failure-test/' s.cfg
common="max_steps=100000 global_batch_size=8 micro_batch_size=2 log_every=1 comm_timeout=10"
wait_steps() { i=0; while [ $i -lt 600 ]; do grep -q "^step *$2/" "$1" 2>/dev/null && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
rank_pids() { pgrep -f "ftmpi s.cfg $common" | while read p; do [ "$(cat /proc/$p/comm)" = ftmpi ] && echo $p; done; }
for how in KILL STOP; do
    start=$(date +%s)
    start_ranks 2 s.cfg $common > $how.log 2>&1; pid=$!
    wait_steps $how.log 3 || { kill -9 $pid; cat $how.log; fail "$how: run did not start"; }
    victim=$(rank_pids | tail -n 1)
    [ -n "$victim" ] || { kill -9 $pid; fail "$how: no rank process found"; }
    t0=$(date +%s)
    kill -$how $victim
    i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 $pid 2>/dev/null; then kill -9 $pid; pkill -9 -f "ftmpi s.cfg $common"; fail "$how: job still alive 60 s later"; fi
    took=$(( $(date +%s) - t0 ))
    [ $took -le 40 ] || fail "$how: took $took s to end (comm_timeout 10)"
    grep -Eq "rank [0-9]+ .*(on|node) [^ ]+|process rank [0-9]+" $how.log || { cat $how.log; fail "$how: no message naming a rank"; }
    echo "$how of one rank: job ended in $took s: $(grep -Em1 'no progress|process rank|exited on signal' $how.log)"
    pkill -9 -f "ftmpi s.cfg $common" 2>/dev/null || true
done
