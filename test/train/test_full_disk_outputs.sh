#!/bin/sh
# A full disk outside checkpoints (issue 23, items 6 and 7), on small tmpfs mounts:
#  6. final_weights that does not fit, on 1 and 2 ranks: exit 1 within a minute, one line
#     saying the file system is full, no w.h5 or w.h5.tmp left, no segfault, no rank
#     left in H5Fclose until comm_timeout (exit 87);
#  7. a metrics_file that fills up: a warning, no record cut in the middle (every line
#     of the file is a whole JSON object), and the run's exit status is 1.
# Needs root (mount); SKIP otherwise.
. "$(dirname "$0")/lib.sh"
have_mpirun || skip "mpirun not found"
mkdir small tiny
mount -t tmpfs -o size=256k tmpfs small 2>/dev/null || skip "cannot mount a tmpfs (needs root)"
if ! mount -t tmpfs -o size=8k tmpfs tiny; then umount small; fail "second tmpfs"; fi
trap 'umount "$SCRATCH/small" "$SCRATCH/tiny"; rm -rf "$SCRATCH"' EXIT
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 comm_timeout=30"

# 6. final_weights (0.5 MB of fp32) on a 256 kB file system
for n in 1 2; do
    timeout 60 "$MPIRUN" --oversubscribe -np $n "$FTMPI" s.cfg $common max_steps=2 final_weights=small/w.h5 > o.log 2> e.log
    rc=$?
    [ $rc -eq 1 ] || { cat e.log; fail "$n rank(s): exit $rc, expected 1"; }
    grep -Eq "Segmentation|MPI_ABORT|ORTE_ERROR_LOG|signal" e.log && { cat e.log; fail "$n rank(s): crash or abort"; }
    [ "$(grep -c '^ftmpi: ' e.log)" -eq 1 ] || { cat e.log; fail "$n rank(s): not one line"; }
    grep -q "^ftmpi: final_weights: small/w.h5: file system full while writing small/w.h5.tmp (removed)" e.log ||
        { cat e.log; fail "$n rank(s): the line does not say the disk is full"; }
    [ -z "$(ls small)" ] || { ls -la small; fail "$n rank(s): files left behind"; }
    echo "final_weights on a full disk, $n rank(s): $(cat e.log)"
done

# 7. metrics_file on an 8 kB file system: about 20 records fit, the run makes 40
run_ranks 2 s.cfg $common max_steps=40 metrics_file=tiny/m.jsonl > o.log 2> e.log
rc=$?
[ $rc -eq 1 ] || { cat e.log; fail "metrics_file on a full disk: exit $rc, expected 1"; }
grep -q "^step *40/40" o.log || { cat o.log; fail "training did not complete"; }
[ "$(grep -c 'warning: metrics_file tiny/m.jsonl: cannot write' e.log)" -eq 1 ] || { cat e.log; fail "not one warning"; }
grep -q "^ftmpi: metrics_file tiny/m.jsonl: incomplete: no records from step [0-9]* on (No space left on device)" e.log ||
    { cat e.log; fail "the final line does not say the metrics are incomplete"; }
n=$(wc -l < tiny/m.jsonl)
[ "$n" -gt 5 ] && [ "$n" -lt 40 ] || fail "$n records: the disk was not full midway"
python3 -c '
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith("\n"), "the last record is cut"
records = [json.loads(line) for line in data.splitlines()]
steps = [r for r in records if r["kind"] == "step"]  # after the start-up "memory" record
for i, r in enumerate(steps):
    assert r["step"] == i + 1, (i, r)
' tiny/m.jsonl || fail "metrics_file is not whole records"
echo "metrics_file on a full disk: $n whole records, one warning, exit 1"
