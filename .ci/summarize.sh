#!/bin/sh
# Prints failing tests' logs and the totals line of an automake test-suite.log.
log=${1:-test-suite.log}
dir=$(dirname "$log")
if [ ! -f "$log" ]; then echo "0 passed, 1 failed (no $log: the build failed)"; exit 1; fi
for trs in $(find "$dir" -name '*.trs'); do
    if grep -q '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$trs"; then
        echo "---- $(basename "${trs%.trs}") ----"
        tail -n 40 "${trs%.trs}.log"
    fi
done
pass=$(sed -n 's/^# PASS: *//p' "$log"); fail=$(sed -n 's/^# FAIL: *//p' "$log")
err=$(sed -n 's/^# ERROR: *//p' "$log"); xpass=$(sed -n 's/^# XPASS: *//p' "$log")
skip=$(sed -n 's/^# SKIP: *//p' "$log"); xfail=$(sed -n 's/^# XFAIL: *//p' "$log")
echo "$((${pass:-0} + ${xfail:-0})) passed, $((${fail:-0} + ${err:-0} + ${xpass:-0})) failed, ${skip:-0} skipped"
