#!/bin/sh
# Line coverage of cuda/ under the emulated test suite (gcov), and a check that every
# kernel (__global__ function, every template instance) was launched.
#
#   test/cudaemu/coverage.sh [BUILD_DIR]      (default build-cov; configured if missing)
#
# Builds with --coverage -O0 on the CPU execution harness, runs the tests that exercise
# cuda/ (test_cuda_ops, the device = "cuda" end-to-end tests, the harness's own tests),
# then prints per-file and total line coverage of cuda/ and the kernels never launched.
# Exit status 1 if the total is under 95 % or a kernel was never launched. Developer tool
# (a few minutes); the figures are recorded in doc/cuda-emulation.md.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-build-cov}
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p "$dir"
cd "$dir"
flags="--coverage -O0 -g -DFT_COVERAGE"
[ -f Makefile ] || ../configure -q --with-cuda-emulation CFLAGS="$flags" CXXFLAGS="$flags" LDFLAGS=--coverage
make -j2 >/dev/null
find . -name '*.gcda' -delete
# every test of test/cuda (the TESTS of its Makefile.inc, continuation lines joined), so
# that a test added there counts here too
tests=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$top/test/cuda/Makefile.inc" |
        awk '/^CUDA_SHELL_TESTS =/ { sub(/^CUDA_SHELL_TESTS =/, ""); shell = $0 }
             /^TESTS \+=/ { sub(/^TESTS \+=/, ""); gsub(/\$\(CUDA_SHELL_TESTS\)/, shell); all = all " " $0 }
             END { print all }')
# and the tests elsewhere that run device = "cuda" (the phase timer's events)
tests="$tests test/train/test_phases.sh"
make -j2 check TESTS="$tests" >/dev/null 2>&1 || { echo "coverage: the tests failed"; exit 1; }

# gcov per object: "File '../cuda/X'" then "Lines executed:P% of N", for the object's own
# source and the headers it includes. A source's lines are counted once (its own object);
# a header's best coverage over the objects that include it is reported beside.
summary=$(for o in cuda/*.o; do
    b=$(basename "$o" .o)
    src=$(ls "$top/cuda/$b".cu "$top/cuda/$b".c 2>/dev/null | head -n 1)
    [ -n "$src" ] && [ -f "cuda/$b.gcda" ] && gcov -n -o "$o" "$src" 2>/dev/null
done | awk '
    /^File / { f = $2; gsub(/\x27/, "", f); sub(/.*\//, "", f) }
    /^Lines executed:/ { split($2, a, ":"); p = a[2]; sub(/%/, "", p); n = $4;
        if (f ~ /\.(cu|c)$/) { if (!(f in tot)) { tot[f] = n; hit[f] = p * n / 100 } }
        else if (!(f in hb) || p > hb[f]) { hb[f] = p; hn[f] = n } }
    END {
        for (f in tot) { printf "  %-28s %5.0f / %5d lines  %5.1f %%\n", f, hit[f], tot[f], 100 * hit[f] / tot[f]; T += tot[f]; H += hit[f] }
        for (f in hb) if (f ~ /^(cuda|comm)/) printf "  %-28s %5d lines (header, best %.1f %%)\n", f, hn[f], hb[f]
        printf "cuda/ total: %.0f / %d lines, %.1f %%\n", H, T, 100 * H / T }' | sort)
echo "$summary"
# kernels: every __global__ function instance must have been called at least once
never=$(for o in cuda/*.o; do
    b=$(basename "$o" .o)
    [ -f "$top/cuda/$b.cu" ] && [ -f "cuda/$b.gcda" ] && gcov -n -f -o "$o" "$top/cuda/$b.cu" 2>/dev/null
done | awk '/^Function / { f = $2 } /^Lines executed:0.00%/ { if (f ~ /kernel/) print f }' | sort -u)
[ -n "$never" ] && { echo "kernels never launched:"; echo "$never"; }
pct=$(echo "$summary" | sed -n 's/^cuda\/ total: .* \([0-9.]*\) %$/\1/p')
[ -z "$never" ] && awk -v p="$pct" 'BEGIN { exit !(p >= 95) }'
