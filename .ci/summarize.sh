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
# The slowest tests, from each log's birth (the test's start) and last write (its end),
# where the file system records births: where CI's minutes go.
find "$dir" -name '*.trs' | sed 's/\.trs$/.log/' | xargs stat -c '%W %Y %n' 2>/dev/null |
    awk '$1 > 0 { printf "%d %s\n", $2 - $1, $3 }' | sort -rn | head -n 8 |
    awk '{ sub(".*/", "", $2); sub("\\.log$", "", $2); s = s (NR > 1 ? ", " : "") $2 " " $1 " s" }
         END { if (NR) print "slowest tests: " s }'
pass=$(sed -n 's/^# PASS: *//p' "$log"); fail=$(sed -n 's/^# FAIL: *//p' "$log")
err=$(sed -n 's/^# ERROR: *//p' "$log"); xpass=$(sed -n 's/^# XPASS: *//p' "$log")
skip=$(sed -n 's/^# SKIP: *//p' "$log"); xfail=$(sed -n 's/^# XFAIL: *//p' "$log")
echo "$((${pass:-0} + ${xfail:-0})) passed, $((${fail:-0} + ${err:-0} + ${xpass:-0})) failed, ${skip:-0} skipped"
