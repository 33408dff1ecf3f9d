#!/bin/sh
# The trainer's files against a hostile directory (issue 23):
#  2. a symlink planted at a temporary name (step-N.h5.tmp, latest.tmp, final_weights.tmp)
#     is never written through: the run stops with one line, the link's target unchanged;
#  3. final_weights naming an input (data.train, model.weights) is refused before training;
#  8. a FIFO as checkpoint_dir/latest, data or weights, as the config file or an @include,
#     /dev/zero as the config: one line within 10 s (exit 2, the files the config names),
#     never a hang until comm_timeout;
# 10. --exit-status reads back a record of a 600-character and a 100 kB FTMPI_RUN_ID.
. "$(dirname "$0")/lib.sh"
have_mpirun || skip "mpirun not found"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"

# refused CODE PATTERN WHAT ARGS...: ftmpi on 2 ranks exits CODE within 10 s with one
# ftmpi line on standard error, holding PATTERN, and no MPI abort
refused() {
    code=$1 pat=$2 what=$3; shift 3
    timeout 10 "$MPIRUN" --oversubscribe -np 2 "$FTMPI" "$@" > o.log 2> e.log; rc=$?
    [ $rc -eq 124 ] && { cat e.log; fail "$what: still running after 10 s"; }
    [ $rc -eq "$code" ] || { cat e.log; fail "$what: exit $rc, expected $code"; }
    [ "$(grep -c '^ftmpi: ' e.log)" -eq 1 ] || { cat e.log; fail "$what: not one ftmpi line"; }
    grep -q -- "$pat" e.log || { cat e.log; fail "$what: message lacks '$pat'"; }
    grep -Eq "MPI_ABORT|ORTE_ERROR_LOG|Segmentation" e.log && { cat e.log; fail "$what: MPI abort"; }
    echo "$what: $(grep '^ftmpi: ' e.log)"
}
victim() { # victim NAME: a file whose content must survive
    printf 'precious %s\n' "$1" > "$1"
}
intact() { # intact NAME WHAT
    [ "$(cat "$1")" = "precious $1" ] || fail "$2: $1 was overwritten"
}

# 2. symlinks at the temporary names
victim v_step
mkdir ck1
ln -s "$PWD/v_step" ck1/step-000002.h5.tmp
refused 1 "ck1/step-000002.h5.tmp: the temporary file's name is taken by a symbolic link" \
    "symlink at step-000002.h5.tmp" s.cfg $common max_steps=2 save_every=1 checkpoint_dir=ck1
intact v_step "step tmp"
[ "$(cat ck1/latest)" = "step-000001.h5" ] || fail "latest does not name step 1"

victim v_latest
mkdir ck2
ln -s "$PWD/v_latest" ck2/latest.tmp
refused 1 "ck2/latest.tmp: the temporary file's name is taken by a symbolic link" \
    "symlink at latest.tmp" s.cfg $common max_steps=1 save_every=1 checkpoint_dir=ck2
intact v_latest "latest tmp"

victim v_final
ln -s "$PWD/v_final" w.h5.tmp
refused 1 "w.h5.tmp: the temporary file's name is taken by a symbolic link" \
    "symlink at final_weights.tmp" s.cfg $common max_steps=1 final_weights=w.h5
intact v_final "final_weights tmp"
grep -q "^step" o.log && fail "final_weights.tmp refused only after training"
rm w.h5.tmp

# a leftover regular .tmp of ours (a killed run's) is replaced, not refused
echo leftover > w2.h5.tmp
run_ranks 2 s.cfg $common max_steps=1 final_weights=w2.h5 > l.log 2>&1 || { cat l.log; fail "a leftover .tmp refused"; }
[ -e w2.h5.tmp ] && fail "the leftover .tmp is still there"
echo "a leftover regular .tmp is replaced"

# 3. final_weights equal to an input
cp train.h5 t2.h5
before=$(cksum < t2.h5)
refused 1 "final_weights ./t2.h5: is the same file as data.train t2.h5" "final_weights = data.train" \
    s.cfg $common max_steps=1 data.train=t2.h5 final_weights=./t2.h5
[ "$(cksum < t2.h5)" = "$before" ] || fail "data.train changed"
ln t2.h5 hard.h5
refused 1 "is the same file as data.train" "final_weights a hard link of data.train" \
    s.cfg $common max_steps=1 data.train=t2.h5 final_weights=hard.h5

# 8. special files
mkdir ck3
run_ranks 2 s.cfg $common max_steps=1 save_every=1 checkpoint_dir=ck3 > c.log 2>&1 || { cat c.log; fail "checkpoint run"; }
rm ck3/latest
mkfifo ck3/latest
refused 2 "ck3/latest: is a FIFO, not a regular file" "FIFO as checkpoint_dir/latest" \
    s.cfg $common max_steps=2 checkpoint_dir=ck3 resume=auto
mkfifo fifo.cfg
refused 2 "fifo.cfg: is a FIFO, not a regular file" "FIFO as the config file" fifo.cfg
refused 2 "/dev/zero: is a character device, not a regular file" "/dev/zero as the config" /dev/zero
{ echo '@include "fifo.cfg"'; cat s.cfg; } > inc.cfg
refused 2 "fifo.cfg: is a FIFO" "FIFO as an @include" inc.cfg $common max_steps=1
mkfifo fifo.h5
refused 2 "fifo.h5: is a FIFO, not a regular file" "FIFO as data.train" s.cfg $common max_steps=1 data.train=fifo.h5
# renamed over a FIFO (or, as root, /dev/null) the finished file would replace the node
mkfifo out.fifo
refused 1 "final_weights out.fifo: is a FIFO, which the finished file would replace" \
    "FIFO as final_weights" s.cfg $common max_steps=1 final_weights=out.fifo
[ -p out.fifo ] || fail "final_weights: the FIFO was replaced"
cat > w.cfg <<CFG
max_steps = 1; micro_batch_size = 2; global_batch_size = 4;
model = { weights = "fifo.h5"; };
data = { train = "train.h5"; };
optimizer = { lr = 1e-3; };
CFG
refused 2 "fifo.h5: is a FIFO, not a regular file" "FIFO as model.weights" w.cfg

# 10. --exit-status with long run ids, as the writer writes them (a stop signal)
for len in 600 100000; do
    id=$(head -c "$len" /dev/zero | tr '\0' r)
    rm -rf ck4
    FTMPI_RUN_ID=$id start_ranks 1 s.cfg $common max_steps=100000 checkpoint_dir=ck4 > e.log 2>&1
    pid=$!
    i=0; until grep -q "^step *2/" e.log 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 600 ] || { kill -9 $pid; cat e.log; fail "run did not start"; }; sleep 0.1
    done
    kill -TERM $pid; wait $pid; rc=$?
    [ $rc -eq 85 ] || { cat e.log; fail "stopped run exited $rc"; }
    got=$(FTMPI_RUN_ID=$id "$FTMPI" --exit-status ck4) || fail "--exit-status with a $len-character FTMPI_RUN_ID exited $?"
    [ "$got" = 85 ] || fail "--exit-status printed '$got'"
    FTMPI_RUN_ID="${id}x" "$FTMPI" --exit-status ck4 > /dev/null && fail "a longer id took the record"
    echo "FTMPI_RUN_ID of $len characters: --exit-status gives 85"
done
mkfifo ck4/f; rm ck4/.ftmpi-exit; mv ck4/f ck4/.ftmpi-exit
timeout 10 "$FTMPI" --exit-status ck4 > /dev/null; rc=$?
[ $rc -eq 1 ] || fail "a FIFO as the exit record: exit $rc, expected 1 (no record)"
echo "a FIFO as the exit record: no record, no hang"
