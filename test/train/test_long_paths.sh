#!/bin/sh
# Paths of 245 bytes and more used to crash inside Open MPI 4.1's shared-file-pointer
# components (buffer overflow) at the first collective open, or at the first checkpoint
# after training had run. A 300-byte directory now serves data.train, checkpoint_dir and
# final_weights on 2 ranks, with a resume from there; a path longer than ftmpi's limit
# is refused at start-up in one line.
. "$(dirname "$0")/lib.sh"
unset OMPI_MCA_sharedfp
n=1; have_mpirun && n=2
long=$(printf 'long-path-component-%.0s' 1 2 3 4 5 6 7)/$(printf 'x%.0s' $(seq 1 140))
mkdir -p "$long"
dir="$SCRATCH/$long"
[ ${#dir} -ge 300 ] || fail "test path only ${#dir} bytes"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 "$dir/train.h5" >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1 data.train=$dir/train.h5 checkpoint_dir=$dir/ck"
run_ranks $n s.cfg $common max_steps=2 final_weights="$dir/w.h5" > a.log 2>&1 || { cat a.log; fail "long paths"; }
[ -f "$dir/ck/step-000002.h5" ] && [ -f "$dir/w.h5" ] || fail "outputs missing"
run_ranks $n s.cfg $common max_steps=3 resume=auto > b.log 2>&1 || { cat b.log; fail "resume from a long path"; }
grep -q "resumed from .*step-000002.h5 at step 2" b.log || { cat b.log; fail "did not resume"; }
echo "paths of ${#dir}+ bytes on $n rank(s): trained, checkpointed, wrote weights, resumed"
too=$(printf 'y%.0s' $(seq 1 1100))
"$FTMPI" s.cfg $common max_steps=1 final_weights="$too" > t.log 2>&1; rc=$?
[ "$(grep -c . t.log)" -eq 1 ] || { cat t.log; fail "an over-long path: not one line"; }
[ $rc -eq 2 ] || { cat t.log; fail "an over-long path: exit $rc, not 2"; }
grep -q "command line: final_weights=y*\.\.\.: a path of 1100 bytes; ftmpi takes paths of up to 1024" t.log ||
    { cat t.log; fail "an over-long path: unclear"; }
echo "a path of 1100 bytes: refused at start-up"
