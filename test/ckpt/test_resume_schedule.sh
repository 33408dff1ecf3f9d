#!/bin/sh
# Resuming with a schedule other than the checkpoint's (max_steps or an optimizer
# schedule key) prints one line: old -> new for each changed key and the lr of the next
# step under both schedules; the new lr is the one the step then trains at. Resuming
# with the same schedule prints nothing.
. "$(dirname "$0")/../train/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
run_ranks 1 s.cfg max_steps=4 checkpoint_dir=ck > a.log 2>&1 || { cat a.log; fail "first run"; }
run_ranks 1 s.cfg max_steps=6 checkpoint_dir=ck resume=ck/step-000004.h5 > same.log 2>&1 ||
    { cat same.log; fail "resume"; }
note=$(grep '^ftmpi: resume changes the schedule' same.log) || { cat same.log; fail "no schedule note"; }
echo "$note"
case "$note" in
*"(max_steps 4 -> 6): step 5 trains at lr "*" instead of 0.000e+00, and the cosine decay now reaches min_lr 0 at step 6") ;;
*) fail "note does not say what changed: $note" ;;
esac
said=$(echo "$note" | sed -n 's/.*trains at lr \([0-9.e+-]*\) instead.*/\1/p')
got=$(sed -n 's/^step *5\/6 | loss [0-9.]* | lr \([0-9.e+-]*\) .*/\1/p' same.log)
[ -n "$said" ] && [ "$said" = "$got" ] || fail "the note says lr $said, step 5 trained at $got"
run_ranks 1 s.cfg max_steps=6 checkpoint_dir=ck resume=auto > b.log 2>&1 || { cat b.log; fail "resume"; }
grep -q 'resume changes the schedule' b.log && { cat b.log; fail "a note without a change"; }
run_ranks 1 s.cfg max_steps=8 checkpoint_dir=ck resume=auto optimizer.schedule=linear \
    optimizer.warmup_steps=1 > c.log 2>&1 || { cat c.log; fail "resume"; }
grep -q '^ftmpi: resume changes the schedule (max_steps 6 -> 8, optimizer.schedule cosine -> linear, optimizer.warmup_steps 2 -> 1)' c.log ||
    { cat c.log; fail "schedule keys not named"; }
echo "the resume schedule note names what changed and the lr that follows"
