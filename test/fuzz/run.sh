#!/bin/sh
# Runs every fuzzer (doc/fuzzing.md) for SECONDS each, from its seed corpus in the tree, under
# ASan + UBSan; fails when any fuzzer finds a crash, a leak, a timeout or runs out of memory.
#   test/fuzz/run.sh SECONDS [NAME...]       (from the --enable-fuzzers build directory,
#                                              or with FUZZ_BUILDDIR set)
# New inputs go to a scratch corpus, not to the tree; a crashing input is kept as
# $FUZZ_OUT/NAME/crash-* (default FUZZ_OUT=fuzz-out) to be added to test/fuzz/corpus/NAME/
# once fixed. One summary line per fuzzer: executions, coverage (edges), features.
set -u
secs=${1:?usage: run.sh SECONDS [FUZZER...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
build=${FUZZ_BUILDDIR:-.}
out=${FUZZ_OUT:-fuzz-out}
all="config tokenizer_json tokenizer_encode prep_jsonl safetensors hf_config latest h5_dataset h5_weights h5_checkpoint"
names=${*:-$all}

# libFuzzer's own leak check after each input, with the suppressions of third-party leaks;
# none at exit: Open MPI (MPI_Init in the HDF5 fuzzers) keeps process-lifetime allocations.
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:leak_check_at_exit=0}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_MCA_btl="${OMPI_MCA_btl:-self}"  # the fuzzers that start MPI need no network
export OMP_NUM_THREADS=1

failed=0
for n in $names; do
    bin=$build/test/fuzz/fuzz_$n
    if [ ! -x "$bin" ]; then
        echo "fuzz $n: FAILED ($bin not built: configure --enable-fuzzers and make)"
        failed=$((failed + 1))
        continue
    fi
    work=$out/$n
    rm -rf "$work"
    mkdir -p "$work/corpus"
    dict=""
    [ -f "$here/dict/$n.dict" ] && dict="-dict=$here/dict/$n.dict"
    # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a parser that allocates what
    # a tiny input announces. Seeds first (regression inputs), then new inputs.
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 $dict -artifact_prefix="$work/" \
        "$work/corpus" "$here/corpus/$n" > "$work/log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
    if [ $rc -eq 0 ]; then
        echo "fuzz $n: ok ($secs s, ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?})"
    else
        echo "fuzz $n: FAILED (exit $rc; $work/log)"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$work/log" | head -n 5
        ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null
        failed=$((failed + 1))
    fi
done
[ $failed -eq 0 ]
