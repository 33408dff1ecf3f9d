#!/bin/sh
# The OpenBLAS kernel that ftmpi's CPU GEMMs run (util/blas_core.h, issue 24): with
# AVX-512 (or AVX2) and OPENBLAS_CORETYPE unset it is not a pre-AVX one; a user's
# OPENBLAS_CORETYPE is kept; where OpenBLAS falls back (FTMPI_FAULT=blas:fallback
# pretends it did), ftmpi and ftmpi-generate re-execute themselves once with a better
# core, also from a bare command name and under mpirun, train as a run started with
# that core does, to the bit, and resume bitwise.
. "$(dirname "$0")/../train/lib.sh"
GEN="$B/ftmpi-generate"
# the harness's environment may carry a core of its own choosing (this project's
# machines set OPENBLAS_CORETYPE=Haswell): the cases below set what they test
unset OPENBLAS_CORETYPE FTMPI_BLAS_CORE_FROM FTMPI_FAULT
blas() { timeout 60 "$@" --version | sed -n 's/^blas: //p'; }
core_of() { echo "$1" | sed -n 's/.*, core \([A-Za-z0-9_]*\) (.*/\1/p'; }

line=$(blas "$FTMPI") || fail "ftmpi --version"
case "$line" in OpenBLAS*) ;; *) skip "the linked BLAS is not OpenBLAS ($line): nothing to check" ;; esac
echo "as launched: $line"
# the unset above reached ftmpi: a core from the environment would read "set by the user"
echo "$line" | grep -q -e "OpenBLAS's choice" -e "set by ftmpi" ||
    fail "OPENBLAS_CORETYPE unset, yet the kernel is not OpenBLAS's or ftmpi's choice: $line"

# a user's choice is kept, even where ftmpi would pick another
for fault in "" blas:fallback; do
    l=$(FTMPI_FAULT=$fault OPENBLAS_CORETYPE=Prescott blas "$FTMPI")
    [ "$(core_of "$l")" = Prescott ] && echo "$l" | grep -q "set by the user" ||
        fail "OPENBLAS_CORETYPE=Prescott (FTMPI_FAULT=$fault) not kept: $l"
done

flags=" $(grep -m 1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { case "$flags" in *" $1 "*) return 0 ;; esac; return 1; }
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl; then
    want="(AVX-512)"
elif has avx2 && has fma; then
    want="(AVX2)"
else
    skip "this CPU has neither AVX-512 nor AVX2: no kernel to insist on ($line)"
fi
echo "$line" | grep -q -F "core $(core_of "$line") $want" ||
    fail "OPENBLAS_CORETYPE unset on a CPU with $want: the kernel is not $want: $line"

# a fallback is corrected once (the hook is inherited: without the guard this loops
# until the timeout), from a path, a bare name found on PATH, and in ftmpi-generate
l=$(FTMPI_FAULT=blas:fallback blas "$FTMPI") || fail "re-exec from a path"
echo "fallback corrected: $l"
target=$(core_of "$l")
echo "$l" | grep -q "set by ftmpi (OPENBLAS_CORETYPE=$target): OpenBLAS chose Prescott" &&
    echo "$l" | grep -q -F "core $target $want" || fail "fallback not corrected: $l"
l=$(PATH="$B:$PATH" FTMPI_FAULT=blas:fallback blas ftmpi) || fail "re-exec from a bare name"
[ "$(core_of "$l")" = "$target" ] || fail "re-exec from a bare name: $l"
l=$(FTMPI_FAULT=blas:fallback blas "$GEN") || fail "ftmpi-generate re-exec"
[ "$(core_of "$l")" = "$target" ] || fail "ftmpi-generate: $l"

# training: the start-up log names the kernel; under mpirun each rank re-executes
# itself before MPI_Init and the job is still one job of 2 ranks, whose losses are those
# of the same kernel chosen by hand, bit for bit, and those of 1 rank to round-off
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg small.cfg
FTMPI_FAULT=blas:fallback run_ranks 1 small.cfg max_steps=3 > r1.log 2>&1 || { cat r1.log; fail "1 rank"; }
grep -q "^ftmpi: blas .*core $target .*set by ftmpi" r1.log || { cat r1.log; fail "no blas line in the log"; }
# the re-executed process keeps its name (ps, top, pgrep: not "exe")
( FTMPI_FAULT=blas:fallback exec "$FTMPI" small.cfg max_steps=100000 > long.log 2>&1 ) &
pid=$!
for i in $(seq 600); do grep -q "^step " long.log && break; sleep 0.1; done
comm=$(cat /proc/$pid/comm 2>/dev/null)
kill $pid; wait $pid
grep -q "^ftmpi: blas .*set by ftmpi" long.log || { cat long.log; fail "the long run did not re-execute"; }
[ "$comm" = ftmpi ] || fail "the re-executed process is named '$comm', not ftmpi"
if have_mpirun; then
    FTMPI_FAULT=blas:fallback run_ranks 2 small.cfg max_steps=3 > r2.log 2>&1 || { cat r2.log; fail "2 ranks"; }
    grep -q "^ftmpi: 2 ranks" r2.log || { cat r2.log; fail "the re-executed ranks are not one job"; }
    [ "$(grep -c '^ftmpi: blas .*set by ftmpi' r2.log)" -eq 1 ] || { cat r2.log; fail "not one blas line"; }
    OPENBLAS_CORETYPE=$target run_ranks 2 small.cfg max_steps=3 > h2.log 2>&1 || { cat h2.log; fail "2 ranks, by hand"; }
    losses r2.log > l2; losses h2.log > lh; losses r1.log > l1
    [ "$(wc -l < l2)" -eq 3 ] && cmp -s l2 lh || { paste l2 lh; fail "re-executed ranks differ from $target by hand"; }
    same_losses l2 l1 2e-5 || fail "2 re-executed ranks differ from 1"
    # resume stays bitwise: steps 4-6 resumed from step 3's checkpoint, both runs re-executed
    FTMPI_FAULT=blas:fallback run_ranks 2 small.cfg max_steps=6 save_every=3 keep_last=0 \
        checkpoint_dir=ck final_weights=straight.h5 > a.log 2>&1 || { cat a.log; fail "straight"; }
    FTMPI_FAULT=blas:fallback run_ranks 2 small.cfg max_steps=6 resume=ck/step-000003.h5 \
        final_weights=resumed.h5 > c.log 2>&1 || { cat c.log; fail "resumed"; }
    grep -q "resumed from ck/step-000003.h5 at step 3" c.log || { cat c.log; fail "did not resume"; }
    losses a.log | tail -n 3 > la; losses c.log > lc
    [ "$(wc -l < lc)" -eq 3 ] && cmp -s la lc || { paste la lc; fail "losses after resume differ"; }
    h5diff straight.h5 resumed.h5 /model /model > d.log 2>&1 || { head d.log; fail "weights after resume differ"; }
fi
echo "ok: kernel $target after a fallback; user's choice kept"
