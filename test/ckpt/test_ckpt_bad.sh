#!/bin/sh
# A bad checkpoint is refused with one line naming the file (and the tensor where there
# is one) and exit 1, before any training: corrupted tensor bytes (content hash),
# a truncated file, a checkpoint of another model shape, a `latest` that names
# nothing sensible, a weights file given as a checkpoint.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 32 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"
run_ranks 1 s.cfg $common max_steps=2 checkpoint_dir=ck final_weights=w.h5 > a.log 2>&1 || { cat a.log; fail "setup run"; }
good=ck/step-000002.h5
expect_refused() { # FILE PATTERN DESCRIPTION
    run_ranks 1 s.cfg $common max_steps=3 resume="$1" > e.log 2>&1 && { cat e.log; fail "$3 accepted"; }
    grep -q -- "$2" e.log || { cat e.log; fail "$3: message lacks '$2'"; }
    grep -q "^step " e.log && fail "$3: trained anyway"
    echo "$3: refused: $(grep -m1 'ftmpi:' e.log)"
}
# flip bytes inside the first large dataset's data (datasets >= 1 MiB are 1 MiB aligned;
# smaller ones follow the metadata: corrupt well past the header)
cp $good corrupt.h5
size=$(stat -c %s corrupt.h5)
printf '\377\377\377\377\377\377\377\377' | dd of=corrupt.h5 bs=1 seek=$((size * 2 / 3)) conv=notrunc 2>/dev/null
expect_refused corrupt.h5 "corrupt.h5" "corrupted tensor bytes"
cp $good trunc.h5; truncate -s $((size / 2)) trunc.h5
expect_refused trunc.h5 "trunc.h5" "truncated file"
run_ranks 1 s.cfg $common max_steps=1 model.hidden_size=32 model.intermediate_size=80 checkpoint_dir=other > o.log 2>&1 || { cat o.log; fail "other model"; }
expect_refused other/step-000001.h5 "checkpoint of another model: hidden_size is 32 there, 64 in this run" "another model's checkpoint"
expect_refused w.h5 "expected a 'checkpoint' file" "a weights file"
echo "step-999.h5" > ck/latest; rm -f ck/step-999.h5
run_ranks 1 s.cfg $common max_steps=3 checkpoint_dir=ck resume=auto > l.log 2>&1 && fail "latest naming a missing file accepted"
grep -q "step-999.h5" l.log || { cat l.log; fail "unclear message for a dangling latest"; }
echo "dangling latest: refused"
