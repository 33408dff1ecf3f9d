#!/bin/sh
# Messages that say what is wrong and what to do, once:
# - a refused resume names the families by name and says what to do; a checkpoint of an
#   AdamW run resumed with optimizer.type = "sgd" is refused likewise;
# - gptj with model.parallel_residual = false (which it cannot honour) is a config error;
# - ftmpi-prep names the option in every bad-value error, "--opt V" and "--opt=V" alike;
# - ftmpi-generate MODEL --ids -1,5 names the real problem (an option-like list), not MODEL;
# - a file name appears once per message (ftmpi-generate --prompts, a damaged data.train).
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="max_steps=2 global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"
expect() { # LOG EXIT-WANTED EXIT-GOT PATTERN WHAT
    [ "$3" -eq "$2" ] || { cat "$1"; fail "$5: exit $3, not $2"; }
    grep -q -- "$4" "$1" || { cat "$1"; fail "$5: unexpected message"; }
    echo "ok: $5: $(grep -- "$4" "$1" | head -n 1 | cut -c1-150)"
}
run_ranks 1 s.cfg $common checkpoint_dir=ck > a.log 2>&1 || { cat a.log; fail "first run"; }

run_ranks 1 s.cfg $common max_steps=3 checkpoint_dir=ck resume=auto model.family=qwen2 > f.log 2>&1
expect f.log 2 $? 'ck/step-000002.h5: checkpoint of another model: model.family is llama there, qwen2 in this run; to train this model afresh use a new checkpoint_dir or resume = "none"' "another family"
run_ranks 1 s.cfg $common max_steps=3 checkpoint_dir=ck resume=auto model.num_hidden_layers=3 > l.log 2>&1
expect l.log 2 $? 'num_hidden_layers is 2 there, 3 in this run; to train this model afresh use a new checkpoint_dir' "another shape"
run_ranks 1 s.cfg $common max_steps=3 checkpoint_dir=ck resume=auto optimizer.type=\"sgd\" > o.log 2>&1
expect o.log 2 $? 'ck/step-000002.h5: checkpoint of an optimizer.type = "adamw" run, "sgd" in this run: its optimizer state does not carry over; keep optimizer.type = "adamw"' "adamw checkpoint, sgd run"

run_ranks 1 s.cfg $common model.family=\"gptj\" model.num_key_value_heads=4 model.parallel_residual=false > g.log 2>&1
expect g.log 2 $? 'model.parallel_residual.*false does not apply to gptj, whose block is always parallel' "gptj sequential"
[ "$(wc -l < g.log)" -eq 1 ] || { cat g.log; fail "gptj: not one line"; }

PREP="$B/ftmpi-prep"
for arg in "--seq-len 2147483647" "--seq-len=2147483647"; do
    # shellcheck disable=SC2086
    "$PREP" -t x.json -o y.h5 $arg z.jsonl > p.log 2>&1
    expect p.log 2 $? "^ftmpi-prep: bad value '2147483647' for --seq-len; expected an integer from 1 to" "prep $arg"
done
"$PREP" -t x.json -o y.h5 --pack=tight z.jsonl > p.log 2>&1
expect p.log 2 $? "^ftmpi-prep: bad value 'tight' for --pack; expected greedy, ffd or none" "prep --pack=tight"

GEN="$B/ftmpi-generate"
"$GEN" ck --ids -1,5 > i.log 2>&1
expect i.log 2 $? "unknown option '-1' (a prompt or an --ids list that begins with '-' goes after '--'" "generate --ids -1,5"
! grep -q "'ck'" i.log || { cat i.log; fail "generate --ids -1,5 blames the model path"; }

printf '{"ids":[-1,5]}\n' > p_neg.jsonl
"$GEN" ck --prompts p_neg.jsonl --out out.jsonl --ids > n.log 2>&1
expect n.log 1 $? '^ftmpi-generate: p_neg.jsonl:1: "ids"\[0\] is not a token id' "negative id in --prompts"
[ "$(grep -o 'p_neg.jsonl' n.log | wc -l)" -eq 1 ] || { cat n.log; fail "p_neg.jsonl named twice"; }

cp train.h5 tv.h5
"$B/test/ckpt/ckpt_set_meta" tv.h5 /vocab_size 10 || fail "ckpt_set_meta"
run_ranks 1 s.cfg $common data.train=tv.h5 > v.log 2>&1
expect v.log 1 $? 'tv.h5: row [0-9]* holds token id' "damaged data.train"
[ "$(grep -o 'tv.h5' v.log | wc -l)" -eq 1 ] || { cat v.log; fail "tv.h5 named twice"; }
