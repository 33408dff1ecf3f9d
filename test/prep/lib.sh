# Shared helpers for the ftmpi-prep tests (sourced): the conventions of test/train/lib.sh
# (scratch directory, fail/skip, MPI environment) plus the prep tool, checker and data.
. "$(dirname "$0")/../train/lib.sh"
PREP="$B/ftmpi-prep"
CHECK="$B/test/prep/check_packed"
TOK="$S/test/data/tokenizers"   # the small ones (families/, smollm2-t5/); the real ones: $REAL_TOK
D="$S/test/prep"

# prep_ranks N ARGS...: ftmpi-prep on N ranks (directly for N=1)
prep_ranks() {
    n=$1; shift
    if [ "$n" -eq 1 ]; then "$PREP" "$@"; else "$MPIRUN" --oversubscribe -np "$n" "$PREP" "$@"; fi
}

# make_corpus OUT N: N alpaca lines (the sample, recycled with numbered outputs) so that
# tests have a few hundred records of mixed lengths.
make_corpus() {
    awk -v n="$2" '{ l[NR] = $0 } END {
        for (i = 0; i < n; i++) {
            s = l[i % NR + 1]
            sub(/"output":"/, "\"output\":\"#" i " ", s)
            print s
        } }' "$D/alpaca_sample.jsonl" > "$1"
}
