#!/bin/sh
# A problem that every rank sees alike at start-up is one line, once, exit 2, not one per
# rank followed by Open MPI's MPI_ABORT banner and exit 1; a directory given as a file is
# one line, not pages of mca_fbtl_posix_preadv errors; binary garbage in `latest` is not
# echoed; an error with an obvious remedy names it.
. "$(dirname "$0")/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
cfg=s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"
one_line() { # PATTERN DESCRIPTION ARGS...
    pat=$1 what=$2; shift 2
    run_ranks 2 "$cfg" $common "$@" > o.log 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || { cat o.log; fail "$what: exit $rc, not 2"; }
    [ "$(grep -c '^ftmpi: ' o.log)" -eq 1 ] || { cat o.log; fail "$what: not one ftmpi line"; }
    grep -q -- "$pat" o.log || { cat o.log; fail "$what: message lacks '$pat'"; }
    grep -Eq "MPI_ABORT|mca_fbtl|ORTE_ERROR_LOG|rank [0-9]+:" o.log && { cat o.log; fail "$what: MPI noise"; }
    echo "$what: $(grep '^ftmpi: ' o.log)"
}
mkdir adir
# model.weights instead of the shape keys
sed '/^model = {/,/^};/d' s.cfg > w.cfg && echo 'model = { weights = "nothere.h5"; };' >> w.cfg
cfg=w.cfg
one_line "model.weights: nothere.h5: cannot open: No such file" "a missing model.weights" max_steps=1
cfg=s.cfg
one_line "data.train: nothere.h5: cannot open: No such file" "a missing data.train" max_steps=1 data.train=nothere.h5
# a resume checkpoint of another shape: what to do, not only what is wrong
run_ranks 2 s.cfg $common max_steps=1 checkpoint_dir=ck4 > ok.log 2>&1 || { cat ok.log; fail "making a checkpoint"; }
one_line "use a new checkpoint_dir or resume = \"none\"" "a resume of another shape" \
    max_steps=2 checkpoint_dir=ck4 resume=auto model.num_hidden_layers=1
one_line "data.train: adir: is a directory, not a regular file" "a directory as data.train" max_steps=1 data.train=adir
one_line "resume: adir: is a directory, not a regular file" "a directory as resume" max_steps=1 resume=adir
one_line "data.eval: nothere.h5: cannot open: No such file" "a missing data.eval" max_steps=1 data.eval=nothere.h5
mkdir ck; printf 'step-\001\002\377\033[2J.h5\n' > ck/latest
one_line "ck/latest: does not name a checkpoint file" "binary garbage in latest" max_steps=1 checkpoint_dir=ck resume=auto
if LC_ALL=C grep -q "$(printf '\033')" o.log; then fail "raw bytes of latest echoed"; fi
echo "garbage in latest is not echoed"
