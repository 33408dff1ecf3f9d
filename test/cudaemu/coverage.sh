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
flags="--coverage -O0 -g"
[ -f Makefile ] || ../configure -q --with-cuda-emulation CFLAGS="$flags" CXXFLAGS="$flags" LDFLAGS=--coverage
make -j2 >/dev/null
find . -name '*.gcda' -delete
tests="test/cuda/test_cuda_ops test/cuda/test_cuda_train.sh test/cuda/test_cuda_resume.sh \
test/cuda/test_cuda_generate.sh test/cuda/test_cuda_plan.sh test/cuda/test_cuda_ops_orders.sh"
make -j2 check TESTS="$tests" >/dev/null 2>&1 || { echo "coverage: the tests failed"; exit 1; }

out=$(mktemp -d)
# gcov per object; -r: only sources under the tree, -p: keep paths apart
for o in cuda/*.o; do
    (cd "$out" && gcov -r -p -s "$top" -o "$OLDPWD/$o" "$top/cuda/$(basename "$o" .o)".c* >/dev/null 2>&1 ||
     gcov -r -p -o "$OLDPWD/$o" "$top/cuda/$(basename "$o" .o)".cu >/dev/null 2>&1 || true)
done
# count executable and executed lines of cuda/ sources from the .gcov files
awk -F: '
    FNR == 1 { split(FILENAME, parts, "#"); file = parts[length(parts)]; sub(/\.gcov$/, "", file) }
    $1 ~ /-/ { next }
    { c = $1; gsub(/ /, "", c); if (c == "") next;
      total[file]++; all++;
      if (c != "#####" && c != "=====") { hit[file]++; hits++ } }
    END {
      for (f in total) if (f ~ /\.(cu|cuh|c)$/) printf "  %-28s %5d / %5d lines  %5.1f %%\n", f, hit[f], total[f], 100 * hit[f] / total[f];
      printf "cuda/ total: %d / %d lines, %.1f %%\n", hits, all, 100 * hits / all }' \
    $(ls "$out"/*cuda#*.gcov 2>/dev/null | grep -v "#usr#" ) | sort > "$out/summary"
cat "$out/summary"
# kernels: every __global__ function instance must have been called
never=$(for o in cuda/*.o; do gcov -f -o "$o" "$top/cuda/$(basename "$o" .o).cu" 2>/dev/null; done |
    awk '/^Function/ { f = $2 } /^Lines executed:0.00%/ { if (f ~ /kernel/) print f }' | sort -u)
if [ -n "$never" ]; then echo "kernels never launched:"; echo "$never"; fi
pct=$(sed -n 's/^cuda\/ total: .* \([0-9.]*\) %$/\1/p' "$out/summary")
rm -rf "$out"
[ -z "$never" ] && awk -v p="$pct" 'BEGIN { exit !(p >= 95) }'
