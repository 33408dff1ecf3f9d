#!/bin/sh
# Inputs that used to be trusted are refused before training, with one line and exit 1
# (2 for configuration and for the files it names, refused at start-up): a checkpoint
# whose /meta holds a negative step or data position, a dataset with ids beyond its own
# vocab_size or with no target token, a
# second job on a checkpoint_dir that a running job holds, and a layer count that
# overflowed the layout's int arithmetic.
. "$(dirname "$0")/lib.sh"
SETMETA="$B/test/ckpt/ckpt_set_meta"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"
run_ranks 1 s.cfg $common max_steps=2 checkpoint_dir=ck > a.log 2>&1 || { cat a.log; fail "setup run"; }
expect() { # CODE PATTERN DESCRIPTION ARGS...
    code=$1 pat=$2 what=$3; shift 3
    run_ranks 1 s.cfg $common "$@" > e.log 2>&1
    rc=$?
    [ $rc -eq "$code" ] || { cat e.log; fail "$what: exit $rc, not $code"; }
    grep -q -- "$pat" e.log || { cat e.log; fail "$what: message lacks '$pat'"; }
    grep -q "^step " e.log && fail "$what: trained anyway"
    echo "$what: refused: $(grep -m1 '^ftmpi: .*' e.log | cut -c1-150)"
}
for kv in "step -5:/meta step -5" "data_position -1:/meta data_position -1" \
          "optimizer_step 7:/meta optimizer_step 7 is not within"; do
    cp ck/step-000002.h5 m.h5
    "$SETMETA" m.h5 ${kv%%:*} || fail "set ${kv%%:*}"
    expect 2 "m.h5: ${kv#*:}" "checkpoint with ${kv%%:*}" max_steps=3 resume=m.h5
done
cp train.h5 v.h5; "$SETMETA" v.h5 /vocab_size 10 || fail "set vocab_size"
expect 1 "v.h5: row [0-9]* holds token id [0-9]*, not below the file's vocab_size 10" \
    "ids beyond the dataset's vocab_size" max_steps=1 data.train=v.h5
cp train.h5 z.h5; "$SETMETA" z.h5 /n_target_tokens 0 || fail "set n_target_tokens"
expect 2 "z.h5: no target tokens" "a dataset without targets" max_steps=1 data.train=z.h5
expect 2 "num_hidden_layers.*exceeds the limit of 65536" "num_hidden_layers = 2147483647" \
    max_steps=1 model.num_hidden_layers=2147483647

# a second job on a checkpoint_dir in use: refused at start-up, naming the holder
start_ranks 1 s.cfg $common max_steps=100000 checkpoint_dir=shared save_every=0 > j1.log 2>&1
j1=$!
i=0; until grep -q "^step " j1.log; do
    i=$((i + 1)); [ $i -lt 200 ] || { kill $j1; cat j1.log; fail "first job did not start"; }
    sleep 0.1
done
expect 1 "checkpoint_dir shared: in use by another running job (pid $j1 on " "a second job" \
    max_steps=1 checkpoint_dir=shared
# the directory typed with a trailing slash (shell completion adds one): one slash in the
# lock file's name
expect 1 "^ftmpi: checkpoint_dir shared/: in use by another running job (pid $j1 on [^)]*holds shared/\.ftmpi-lock); give this run its own checkpoint_dir" \
    "a second job, checkpoint_dir shared/" max_steps=1 checkpoint_dir=shared/
kill -KILL $j1; wait $j1 2>/dev/null
run_ranks 1 s.cfg $common max_steps=1 checkpoint_dir=shared > j3.log 2>&1 ||
    { cat j3.log; fail "the lock outlived the killed job"; }
echo "after the first job ends (even by SIGKILL) the directory is free again"
