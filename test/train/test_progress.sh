#!/bin/sh
# What a run shows while it trains, and where:
#  - output not a terminal (a file, as under mpirun or Slurm): a progress line
#    (step, %, loss, tokens/s, elapsed, ETA) whenever progress_every seconds passed
#    without a step line; none with progress_every = 0 or progress = false; never a
#    terminal escape in the log;
#  - a terminal (util-linux `script` gives one): the bar on stderr, for one rank and,
#    through the launcher's terminal, under mpirun;
#  - sizes in human units: memory once (no raw bytes line), comm in B/KiB/MiB/GiB, and
#    the exact bytes in the metrics file.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
# log_every 100: only steps 1 and 6 have step lines; a tiny interval makes 2..5 progress lines
run_ranks 1 s.cfg max_steps=6 log_every=100 progress_every=1e-9 > p.log 2>&1 || { cat p.log; fail "run"; }
grep -c '^progress ' p.log | grep -qx 4 || { cat p.log; fail "expected 4 progress lines (steps 2-5)"; }
grep -q '^progress 3/6 50% | loss [0-9.]* | tok/s [0-9]* | elapsed [0-9hms]* | eta [0-9hms]*$' p.log ||
    { cat p.log; fail "progress line format"; }
tr -d '\n' < p.log | grep -q "$(printf '\033')" && fail "terminal escape in a redirected log"
run_ranks 1 s.cfg max_steps=6 log_every=100 progress_every=0 > z.log 2>&1 || fail "run"
grep -q '^progress' z.log && fail "progress lines with progress_every = 0"
run_ranks 1 s.cfg max_steps=6 log_every=100 progress_every=1e-9 progress=false > f.log 2>&1 || fail "run"
grep -q '^progress' f.log && fail "progress lines with progress = false"
# the default interval (30 s) prints nothing in a run of a second
run_ranks 1 s.cfg max_steps=3 log_every=100 > d.log 2>&1 || fail "run"
grep -q '^progress' d.log && fail "progress line before progress_every passed"
echo "progress lines: every progress_every without a step line, off when asked"

# human units
run_ranks 1 s.cfg max_steps=2 metrics_file=m.jsonl > u.log 2>&1 || { cat u.log; fail "run"; }
grep -q '^ftmpi: memory per rank: params [0-9.]* KiB, grads [0-9.]* KiB, optimizer [0-9.]* KiB' u.log ||
    { cat u.log; fail "memory line not in human units"; }
grep -q 'bytes per rank\|[0-9] bytes' u.log && { cat u.log; fail "raw byte counts in the log"; }
grep -q '^step .*| peak_mem [0-9.]* MiB | comm_wait [0-9.]*s | comm 0 B$' u.log || { cat u.log; fail "step line units"; }
grep -q '^ftmpi: peak backend memory per rank: [0-9.]* MiB (max over ranks)$' u.log || fail "peak line units"
python3 - <<'PY' 2>/dev/null || { command -v python3 >/dev/null && fail "exact bytes missing from the metrics file"; }
import json
recs = [json.loads(l) for l in open("m.jsonl")]
mem = [r for r in recs if r["kind"] == "memory"][0]
# 119488 parameters of the small model, fp32, unsharded
assert mem["params"] == 119488 * 4 and mem["optimizer"] == 2 * 119488 * 4, mem
assert [r for r in recs if r["kind"] == "peak_memory"][0]["backend_bytes"] > 0
PY
if have_mpirun; then
    run_ranks 2 s.cfg max_steps=2 zero_stage=3 > c.log 2>&1 || { cat c.log; fail "2 ranks"; }
    grep -q '^step .*| comm [0-9.]* [KM]iB$' c.log || { cat c.log; fail "comm not in KiB/MiB"; }
fi
echo "log sizes in human units, exact bytes in the metrics file"

# a terminal: the bar on stderr (one rank, and under mpirun via the launcher's terminal)
command -v script >/dev/null 2>&1 || skip "no script(1) to give a terminal (lines checked)"
script -qec "'$FTMPI' s.cfg max_steps=3" /dev/null > t.log 2>&1 || { cat t.log; fail "run on a terminal"; }
grep -q '\[#*\.*\] 3/3 100% | loss' t.log || { cat -v t.log; fail "no progress bar on a terminal"; }
grep -q '^progress' t.log && fail "progress lines on a terminal"
if have_mpirun; then
    script -qec "'$MPIRUN' --oversubscribe -np 2 '$FTMPI' s.cfg max_steps=3" /dev/null > m.log 2>&1 ||
        { cat m.log; fail "mpirun on a terminal"; }
    grep -q '\[#*\.*\] 3/3 100% | loss' m.log || { cat -v m.log; fail "no progress bar under mpirun on a terminal"; }
fi
echo "progress bar on a terminal"
