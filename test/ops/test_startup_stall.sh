#!/bin/sh
# A rank stopped (SIGSTOP) in its first second, before or inside MPI_Init, ends the job with
# exit 87 within comm_timeout plus a few seconds, with one line naming the phase: the
# watchdog runs before MPI_Init with the comm_timeout of the command line (it once
# waited for the 600 s default, so the job hung in MPI_Init with no output).
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
command -v setsid >/dev/null 2>&1 || skip "setsid not found"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
LIMIT=45 # comm_timeout 5 + start-up and mpirun's tear-down, generous for a loaded CI machine
# (the defect this guards against waited for the 600 s default)
stall_case() { # DELAY: seconds after both ranks exist
    setsid "$MPIRUN" --oversubscribe -np 2 "$FTMPI" s.cfg global_batch_size=4 micro_batch_size=2 \
        max_steps=100000 comm_timeout=5 > h.log 2>&1 &
    mp=$!
    t0=$(date +%s)
    n=0 victim=
    while [ $n -lt 100 ]; do # the ranks are mpirun's children
        victim=$(pgrep -P "$mp" | sort -n | sed -n 2p)
        [ -n "$victim" ] && break
        sleep 0.05; n=$((n + 1))
    done
    [ -n "$victim" ] || { kill -KILL -- -"$mp"; fail "the ranks did not start"; }
    sleep "$1"
    kill -STOP "$victim"
    n=0
    while kill -0 "$mp" 2>/dev/null && [ $n -lt $((LIMIT * 5)) ]; do sleep 0.2; n=$((n + 1)); done
    if kill -0 "$mp" 2>/dev/null; then
        kill -CONT "$victim" 2>/dev/null
        kill -KILL -- -"$mp" 2>/dev/null
        wait "$mp"
        cat h.log
        fail "rank stopped $1 s after launch: the job still ran after $LIMIT s"
    fi
    wait "$mp"
    rc=$? took=$(( $(date +%s) - t0 ))
    kill -CONT "$victim" 2>/dev/null
    [ $rc -eq 87 ] || { cat h.log; fail "stopped after $1 s: exit $rc, not 87"; }
    grep -q "^ftmpi: rank [0-9] on .*: no progress for [0-9]* s while .*(comm_timeout 5 s)" h.log ||
        { cat h.log; fail "stopped after $1 s: no watchdog line"; }
    echo "ok: a rank stopped $1 s after launch: exit 87 in $took s: $(grep '^ftmpi: rank' h.log | head -n 1 | cut -c1-120)"
}
stall_case 0
stall_case 0.3
