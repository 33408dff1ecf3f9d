#!/bin/sh
# SIGTERM or SIGUSR1 during start-up ends ftmpi with a documented code (85 with
# checkpoint_dir, 84 without), not the shell's 143/138. The rank is held in set-up
# (FTMPI_FAULT=stop:0:opening stops it there), signalled, then continued.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 max_steps=4"
for case in "TERM 85 checkpoint_dir=ck" "USR1 85 checkpoint_dir=ck" "TERM 84 log_every=1"; do
    set -- $case
    sig=$1 want=$2 extra=$3
    FTMPI_FAULT=stop:0:opening start_ranks 1 s.cfg $common $extra > s.log 2>&1
    pid=$!
    i=0; until [ "$(ps -o stat= -p $pid 2>/dev/null | cut -c1)" = T ]; do
        i=$((i + 1)); [ $i -lt 300 ] || { kill -9 $pid; fail "$sig: ftmpi never reached set-up"; }
        sleep 0.1
    done
    kill -$sig $pid; kill -CONT $pid
    wait $pid; rc=$?
    [ $rc -eq $want ] || { cat s.log; fail "SIG$sig during start-up ($extra): exit $rc, not $want"; }
    grep -q "stop signal during start-up: nothing trained; exiting with $want" s.log || { cat s.log; fail "$sig: no message"; }
    grep -q "^step " s.log && fail "$sig: trained after the signal"
    echo "SIG$sig during start-up ($extra): exit $want"
done
