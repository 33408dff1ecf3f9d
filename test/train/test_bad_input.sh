#!/bin/sh
# Bad input gets one clear line naming the file and the problem, and a non-zero exit:
# 2 for the command line and config, and for the files it names that cannot serve the
# run (missing or not ftmpi files, another vocabulary or seq_len) found at start-up; 1 for
# runtime problems.
. "$(dirname "$0")/lib.sh"
"$GENDATA" --rows 16 --seq-len 32 train.h5 >/dev/null || fail "gendata"
write_small_cfg ok.cfg

expect() { # expect CODE PATTERN ARGS...: exit code and a message matching PATTERN
    code=$1; pat=$2; shift 2
    "$FTMPI" "$@" > out.log 2>&1; rc=$?
    [ "$rc" -eq "$code" ] || { cat out.log; fail "ftmpi $*: exit $rc, expected $code"; }
    grep -q -- "$pat" out.log || { cat out.log; fail "ftmpi $*: no message matching '$pat'"; }
    if [ "$code" -ne 0 ]; then
        [ "$(grep -c . out.log)" -eq 1 ] || { cat out.log; fail "ftmpi $*: not exactly one message line"; }
    fi
}

expect 0 "Usage: ftmpi" --help
expect 0 "^ftmpi [0-9]" --version
expect 0 "optimizer.lr" --help-config
expect 2 "unknown option '--bogus'" --bogus ok.cfg
expect 2 "no config file given"
expect 2 "missing.cfg: cannot open" missing.cfg
printf 'max_steps = 5\nfoo = 1;\n' > syntax.cfg
expect 2 "syntax.cfg:2: " syntax.cfg
sed 's/grad_clip = 1.0;/grad_clip = 1.0; gradclip = 2.0;/' ok.cfg > unknown.cfg
expect 2 "unknown.cfg:7: unknown key 'gradclip'" unknown.cfg
expect 2 "command line: optimizer.lr=abc" ok.cfg optimizer.lr=abc
expect 2 "zero_stage" ok.cfg zero_stage=9
expect 2 "num_attention_heads" ok.cfg model.num_attention_heads=5
expect 2 "nothere.h5" ok.cfg data.train=nothere.h5
printf 'not hdf5' > junk.h5
expect 2 "junk.h5" ok.cfg data.train=junk.h5
expect 2 "vocab_size 259 exceeds the model's 100" ok.cfg model.vocab_size=100
cat > w.cfg <<CFG
max_steps = 1; micro_batch_size = 2; global_batch_size = 2;
model = { weights = "train.h5"; };
data = { train = "train.h5"; };
optimizer = { lr = 1e-3; };
CFG
expect 2 "train.h5: is an ftmpi 'dataset' file, expected a 'weights' file" w.cfg
echo "all bad inputs rejected clearly"

# Configuration mistakes found against the run (ranks, data, build) are still config
# errors: exit 2, one line, naming the file:line or the command-line override at fault.
expect 2 'command line: resume=auto: "auto" needs checkpoint_dir' ok.cfg resume=auto
expect 2 "command line: global_batch_size=6: 6 is not a multiple of micro_batch_size 4 x 1 ranks" \
    ok.cfg global_batch_size=6 micro_batch_size=4
expect 2 "command line: model.max_position_embeddings=16: 16 is below data.train's seq_len 32" \
    ok.cfg model.max_position_embeddings=16
sed 's/max_position_embeddings = 64;/max_position_embeddings = 16;/' ok.cfg > short.cfg
expect 2 "short.cfg:1[0-9]: model.max_position_embeddings: 16 is below data.train's seq_len 32" short.cfg
# an override that conflicts with the file is the one named
expect 2 "command line: max_steps=1: 1 is less than optimizer.warmup_steps (2)" ok.cfg max_steps=1
if "$FTMPI" --version | grep -q '^backends: cpu$'; then
    expect 2 "command line: device=cuda: this ftmpi is built without CUDA" ok.cfg device=cuda
fi
echo "config errors found at run time: exit 2 with file:line or the override"

# data.eval is checked at start-up, not at the first evaluation (steps later)
"$GENDATA" --rows 8 --seq-len 24 short.h5 >/dev/null || fail "gendata short"
expect 2 "data.eval: noeval.h5: cannot open" ok.cfg data.eval=noeval.h5 eval_every=4
expect 2 "data.eval: junk.h5" ok.cfg data.eval=junk.h5 eval_every=4
expect 2 "data.eval: short.h5: seq_len 24 differs from data.train's 32" ok.cfg data.eval=short.h5 eval_every=4
cp train.h5 bigvocab.h5; "$B/test/ckpt/ckpt_set_meta" bigvocab.h5 /vocab_size 1000 || fail "set vocab"
expect 2 "data.eval: bigvocab.h5: dataset vocab_size 1000 exceeds the model's 259" ok.cfg data.eval=bigvocab.h5 eval_every=4
echo "bad data.eval refused before step 1"
expect 1 "final_weights: nodir/w.h5.tmp: cannot create" ok.cfg final_weights=nodir/w.h5
echo "an unwritable final_weights refused before step 1"
# a model that cannot fit the node (~16 TB) is refused before allocating, not OOM-killed
expect 1 "needs [0-9.]* GiB per rank x 1 rank on this node = [0-9.]* GiB, the node has" \
    ok.cfg model.num_hidden_layers=65536 model.hidden_size=1024 model.intermediate_size=4096
echo "a run larger than the node refused before allocating"
