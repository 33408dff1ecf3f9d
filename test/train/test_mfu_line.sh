#!/bin/sh
# The step lines' MFU is the step's model FLOPs over its time and the ranks' peak
# (train/mfu.h), with attention counted over the pairs the document masks let through.
# Eight steps of 8 rows are exactly one epoch of the 64-row dataset, so whatever the
# order, the run's FLOPs are 6 N x every token + 12 L H d x every visible pair of the
# file, counted here from its /segment with h5dump. Each step's FLOPs are recovered
# from its line as mfu x ranks x peak x tokens / (tok/s), and their sum must match to
# 1 %. The shape (hidden 32, 4 heads of 64) makes attention a few % of the FLOPs, so
# leaving it out, or counting the causal average instead of the documents, fails.
# Without a peak on the CPU the field is "-" and one line says how to get it; the
# start-up line names every phase, and splits init into making the values and placing them.
. "$(dirname "$0")/lib.sh"
command -v h5dump >/dev/null 2>&1 || skip "h5dump not found (hdf5-tools)"
"$GENDATA" --rows 64 --seq-len 32 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
shape="model.hidden_size=32 model.head_dim=64 max_steps=8 global_batch_size=8"
# N = 2 x (q 32x256 + k, v 32x128 + o 256x32 + gate, up, down 32x160) + lm_head 259x32
N=$(( 2 * (32*256 + 2*32*128 + 256*32 + 3*32*160) + 259*32 ))
PER_KEY=$(( 12 * 2 * 4 * 64 ))
PEAK=0.001 # TFLOP/s: MFU in the thousands of %, so that its printed digits are many
# visible (query, key) pairs of every row: query t of a document starting at s sees t-s+1
KEYS=$(h5dump -d /segment -y -w 0 train.h5 | awk -F', *' '
    /^ *[0-9-]/ { start = 0; for (t = 1; t <= 32; t++) {
                      if (t > 1 && $t != $(t - 1)) start = t - 1; k += t - 1 - start + 1 } }
    END { print k }')
[ "$KEYS" -gt 0 ] || fail "no segment ids read"
WANT=$(awk -v n="$N" -v pk="$PER_KEY" -v k="$KEYS" 'BEGIN { printf "%.0f", 6 * n * 64 * 32 + pk * k }')
SHARE=$(awk -v w="$WANT" -v pk="$PER_KEY" -v k="$KEYS" 'BEGIN { printf "%.1f", 100 * pk * k / w }')

# check_mfu LOG RANKS
check_mfu() {
    sed -n 's/^step .*| tok\/s \([0-9.]*\) | mfu \([0-9.]*\)% .*/\1 \2/p' "$1" > pairs
    [ "$(wc -l < pairs)" -eq 8 ] || { cat "$1"; fail "not 8 step lines with an mfu figure"; }
    awk -v want="$WANT" -v peak="$PEAK" -v p="$2" '
        { got += $2 / 100 * p * peak * 1e12 * 8 * 32 / $1 }
        END { d = got - want; if (d < 0) d = -d
              printf "%d rank(s): %.4g FLOPs from the step lines, %.4g by hand\n", p, got, want
              exit d > 0.01 * want }' pairs || { cat "$1"; fail "printed MFU does not match"; }
}
echo "N $N, $KEYS visible pairs: attention is $SHARE % of the FLOPs"
awk -v s="$SHARE" 'BEGIN { exit s < 3 }' || fail "attention share too small for the check to see it"
"$FTMPI" s.cfg $shape peak_tflops=$PEAK > one.log 2>&1 || { cat one.log; fail "run"; }
grep -q "^ftmpi: MFU peak 0.001 TFLOP/s per rank (peak_tflops in the config)" one.log ||
    { cat one.log; fail "the peak's line"; }
check_mfu one.log 1
if have_mpirun; then
    run_ranks 2 s.cfg $shape peak_tflops=$PEAK > two.log 2>&1 || { cat two.log; fail "2 ranks"; }
    check_mfu two.log 2
fi

# no peak on the CPU: no figure, and the reason once
"$FTMPI" s.cfg max_steps=2 > none.log 2>&1 || { cat none.log; fail "run without a peak"; }
grep -q "| mfu - |" none.log || { cat none.log; fail "an MFU without a peak"; }
[ "$(grep -c '^ftmpi: MFU not shown: a CPU has no datasheet peak' none.log)" -eq 1 ] ||
    { cat none.log; fail "the no-peak line"; }
grep -Eq '^ftmpi: start-up [0-9.]+ s \(cpu [0-9.]+ s\): exec [0-9.]+ s, mpi [0-9.]+ s, config [0-9.]+ s, backend [0-9.]+ s, open [0-9.]+ s, checks [0-9.]+ s, allocate [0-9.]+ s, init [0-9.]+ s \(values [0-9.]+ s, placing [0-9.]+ s\), loader [0-9.]+ s$' none.log ||
    { cat none.log; fail "the start-up line"; }
# init's two parts add up to it (each printed to 0.1 s)
sed -n 's/.* init \([0-9.]*\) s (values \([0-9.]*\) s, placing \([0-9.]*\) s).*/\1 \2 \3/p' none.log |
    awk '{ d = $2 + $3 - $1; exit !(d > -0.15 && d < 0.15) }' ||
    { cat none.log; fail "the start-up line: init's values and placing do not add up to it"; }
echo "no peak: mfu -; $(grep '^ftmpi: start-up' none.log)"
