#!/bin/sh
# eval_prompts: at every evaluation each prompt is completed greedily with the
# parameters being trained, and the completion is written to the log ("sample" lines)
# and the metrics file ("sample" records). At the last step the completions equal
# ftmpi-generate's greedy output from the run's final weights, also on 2 ranks at
# ZeRO stage 3 (where every rank gathers the units the decoder reads). With
# precision = "bf16" the samples decode in bf16 from the working bf16 parameters: they
# equal ftmpi-generate --params model on the final checkpoint's /model (bf16).
# Bad settings, and a tokenizer other than the data's, end in one line.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 5 eval.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
GEN="$B/ftmpi-generate"
samples='eval_prompts=["12+34=", "7+8="]'
check() { # N MODEL ARGS... (MODEL: ftmpi-generate's model arguments, word-split)
    n=$1; model=$2; shift 2
    rm -rf m.jsonl ck
    run_ranks "$n" s.cfg max_steps=30 log_every=30 data.eval=eval.h5 eval_every=15 "$samples" \
        eval_tokenizer=bytes eval_max_new_tokens=6 metrics_file=m.jsonl final_weights=out.h5 "$@" \
        > r.log 2>&1 || { cat r.log; fail "run $n ranks $*"; }
    [ "$(grep -c '^sample ' r.log)" -eq 4 ] || { cat r.log; fail "expected 4 sample lines (2 evals x 2 prompts)"; }
    grep -q '^sample     30 | 2/2 | "7+8=" -> ".*" (eos\|length)$' r.log || { cat r.log; fail "sample line format"; }
    for p in "12+34=" "7+8="; do
        # shellcheck disable=SC2086
        "$GEN" --byte-tokens --max-new-tokens 6 $model "$p" > want.txt 2>&1 || { cat want.txt; fail "ftmpi-generate"; }
        python3 - "$p" <<'PY' || fail "$n ranks $*: the step-30 sample of $p is not ftmpi-generate's"
import json, sys
recs = [json.loads(l) for l in open("m.jsonl")]
got = [r for r in recs if r["kind"] == "sample" and r["step"] == 30 and r["prompt"] == sys.argv[1]]
want = open("want.txt", encoding="utf-8", errors="replace").read()
assert len(got) == 1, got
print(repr(got[0]["completion"]), "=", repr(want))
assert got[0]["completion"].rstrip("\n") == want.rstrip("\n")
PY
    done
}
check 1 out.h5
have_mpirun && check 2 out.h5 zero_stage=3
bf16="precision=bf16 checkpoint_dir=ck"
# shellcheck disable=SC2086
check 1 "--params model ck" $bf16
# shellcheck disable=SC2086
have_mpirun && check 2 "--params model ck" $bf16 zero_stage=3
echo "samples at evaluations = ftmpi-generate on the same weights"
# one line each (on stderr; a tokenizer file is read after the start-up lines, once the
# model's shape is known): no tokenizer, a missing tokenizer file, an unknown template
run_ranks 1 s.cfg data.eval=eval.h5 eval_every=2 "$samples" > a.log 2>&1
[ $? -eq 2 ] && grep -q 'eval_prompts.*needs eval_tokenizer' a.log || { cat a.log; fail "no tokenizer"; }
run_ranks 1 s.cfg data.eval=eval.h5 eval_every=2 "$samples" eval_tokenizer=missing.json > b.out 2> b.log
[ $? -eq 2 ] && [ "$(wc -l < b.log)" -eq 1 ] && grep -q 'eval_tokenizer.*missing.json' b.log || { cat b.log; fail "missing tokenizer"; }
run_ranks 1 s.cfg data.eval=eval.h5 eval_every=2 "$samples" eval_tokenizer=bytes eval_template=nope > c.log 2>&1
[ $? -eq 2 ] && grep -q 'eval_template.*"nope" is not a template' c.log || { cat c.log; fail "bad template"; }
echo "eval_prompts settings checked"
# the samples' tokenizer must be the data's (tokenizer fingerprints, train/tok_check.h):
# Llama 2's tokenizer on data made with Llama 3's is refused in one line, exit 2
T="$REAL_TOK"
head -n 3 "$S/test/prep/alpaca_sample.jsonl" > a.jsonl
"$B/ftmpi-prep" -q -t "$T/llama3/tokenizer.json" --seq-len 32 -o l3.h5 a.jsonl || fail "prep"
sed -e 's/vocab_size = 259/vocab_size = 128256/' -e 's/train.h5/l3.h5/' s.cfg > v.cfg
run_ranks 1 v.cfg max_steps=2 data.eval=l3.h5 eval_every=2 'eval_prompts=["hi"]' \
    eval_tokenizer="$T/llama2/tokenizer.json" > v.out 2> v.err
[ $? -eq 2 ] && [ "$(wc -l < v.err)" -eq 1 ] &&
    grep -q 'eval_tokenizer .*llama2/tokenizer.json was made with another tokenizer than data.train l3.h5' v.err ||
    { cat v.err; fail "a tokenizer other than the data's"; }
run_ranks 1 v.cfg max_steps=2 data.eval=l3.h5 eval_every=2 'eval_prompts=["hi"]' eval_max_new_tokens=2 \
    eval_tokenizer="$T/llama3/tokenizer.json" > w.log 2>&1 || { cat w.log; fail "the data's own tokenizer"; }
grep -q '^sample      2 | 1/1 | "hi" -> ' w.log || { cat w.log; fail "no sample with the data's tokenizer"; }
echo "eval_tokenizer checked against the data's tokenizer"
