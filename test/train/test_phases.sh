#!/bin/sh
# profile_phases = true: after each logged step line, one line with rank 0's step time by
# phase, and a "phases" record per step in the metrics file. On the CPU the phases are
# wall-clock spans of synchronous work, so (after the first step's warm-up) they cover
# most of the step and never more than it; the recompute phase is there exactly when
# activation checkpointing is on. On the CUDA backend (a GPU, or the harness, whose
# events time nothing) the line and the records are there and name the device's time.
# Without the key: no line, no record.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 64 --seq-len 64 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="max_steps=4 global_batch_size=8 micro_batch_size=2 optimizer.warmup_steps=1"

run() { # run TAG ARGS...
    tag=$1; shift
    rm -f m.jsonl
    "$FTMPI" s.cfg $common metrics_file=m.jsonl "$@" > "$tag.log" 2>&1 || { cat "$tag.log"; fail "$tag: run"; }
}
# fields of the phases lines: the 7 phases, other and the step's ms
fields() {
    sed -n "s/^ftmpi: step [0-9]* by phase (ms, [^)]*): //p" "$1" | awk -F' [|] ' '{
        n = split("forward head recompute backward reduce norm optimizer", want, " ")
        if (NF != 8) { print "fields: " $0 > "/dev/stderr"; next }
        line = ""
        for (i = 1; i <= 7; i++) {
            split($i, kv, " ")
            if (kv[1] != want[i]) { print "fields: " $0 > "/dev/stderr"; next }
            line = line " " kv[2]
        }
        split($8, o, " ")  # other X of the step'"'"'s Y
        if (o[1] != "other") { print "fields: " $0 > "/dev/stderr"; next }
        print "s" line " " o[2] " " o[6]
    }'
}

run plain
grep -q "by phase" plain.log && fail "a phases line without profile_phases"
grep -q '"kind":"phases"' m.jsonl && fail "a phases record without profile_phases"

for ckpt in true false; do
    run cpu-$ckpt profile_phases=true activation_checkpointing=$ckpt
    [ "$(grep -c '^step ' cpu-$ckpt.log)" -eq 4 ] || fail "cpu-$ckpt: step lines"
    [ "$(grep -c 'by phase (ms, wall clock)' cpu-$ckpt.log)" -eq 4 ] || { cat cpu-$ckpt.log; fail "cpu-$ckpt: phases lines"; }
    [ "$(grep -c '"kind":"phases","step":' m.jsonl)" -eq 4 ] || { cat m.jsonl; fail "cpu-$ckpt: records"; }
    for k in forward_ms head_ms recompute_ms backward_ms reduce_ms norm_ms optimizer_ms other_ms step_ms; do
        [ "$(grep -c "\"$k\":" m.jsonl)" -eq 4 ] || fail "cpu-$ckpt: $k missing from the records"
    done
    fields cpu-$ckpt.log > f.txt
    [ "$(wc -l < f.txt)" -eq 4 ] || { cat cpu-$ckpt.log; fail "cpu-$ckpt: unparsed phases line"; }
    # steps 2-4 (prints the offending line): forward, head, backward and optimizer timed;
    # the phases add up to at most the step and to at least half of it
    awk -v ckpt=$ckpt 'NR > 1 {
        sum = $2 + $3 + $4 + $5 + $6 + $7 + $8
        if (!($2 > 0 && $3 > 0 && $5 > 0 && $8 > 0)) { print "untimed phase: " $0; bad = 1 }
        if ((ckpt == "true") != ($4 > 0)) { print "recompute vs checkpointing " ckpt ": " $0; bad = 1 }
        if (sum > $10 + 0.2 || sum < 0.5 * $10) { print "sum " sum " of " $10 ": " $0; bad = 1 }
    } END { exit bad }' f.txt || fail "cpu-$ckpt: phases"
    echo "cpu, checkpointing $ckpt: $(sed -n 4p f.txt)"
done

if cuda_cases &&
    "$FTMPI" s.cfg device=cuda max_steps=1 optimizer.warmup_steps=0 > probe.log 2>&1; then
    run cuda profile_phases=true device=cuda precision=bf16
    [ "$(grep -c "by phase (ms, the device's time)" cuda.log)" -eq 4 ] || { cat cuda.log; fail "cuda: phases lines"; }
    [ "$(grep -c '"kind":"phases"' m.jsonl)" -eq 4 ] || fail "cuda: records"
    echo "cuda: $(grep 'by phase' cuda.log | tail -n 1)"
fi
exit 0
