#!/bin/sh
# A trained model answers what it learned: train the demo's byte-token model shape
# (smaller) on ftmpi-gendata's one-digit additions until it has memorised them, then
# ftmpi-generate on the checkpoint directory completes "3+4=" with "7\n" (greedy,
# stopping at EOS), and batch mode answers all 100 one-digit sums.
#
# Tuning (reliable in ~5 s on one core): 128 rows of 24 tokens hold ~2 documents each,
# so the ~256 documents cover the 100 distinct sums; a 2-layer, 64-wide model at
# lr 1e-2 (cosine to 1e-3, no weight decay) reaches an answer loss below 1e-2 within
# 300 steps of 16 rows, after which greedy decoding is exact on every sum.
. "$(dirname "$0")/../train/lib.sh"
GEN="$B/ftmpi-generate"
"$GENDATA" --rows 128 --seq-len 24 --digits 1 train.h5 > /dev/null || fail "gendata"
cat > learn.cfg <<CFG
device = "cpu";
max_steps = 300;
seed = 7;
micro_batch_size = 16;
global_batch_size = 16;
activation_checkpointing = false;
grad_clip = 1.0;
log_every = 50;
checkpoint_dir = "ck";
model = {
  vocab_size = 259; hidden_size = 64; intermediate_size = 160; num_hidden_layers = 2;
  num_attention_heads = 4; num_key_value_heads = 2; max_position_embeddings = 32;
  rope_theta = 10000.0; bos_token_id = 256; eos_token_id = 257;
};
data = { train = "train.h5"; };
optimizer = { type = "adamw"; lr = 1e-2; min_lr = 1e-3; weight_decay = 0.0;
              schedule = "cosine"; warmup_steps = 10; };
CFG
run_ranks 1 learn.cfg > train.log 2>&1 || { cat train.log; fail "training"; }
last=$(losses train.log | tail -n 1)
[ -f ck/latest ] || { cat train.log; fail "no checkpoint written"; }

# the exact bytes of the completion: "7\n", EOS not printed
"$GEN" ck --byte-tokens "3+4=" --verbose > answer.txt 2> gen.log || { cat gen.log; fail "generate"; }
printf '7\n' > want.txt
cmp -s answer.txt want.txt ||
    fail "3+4= completed with '$(od -An -c answer.txt)' (final training loss $last)"
grep -q "stop: eos" gen.log || { cat gen.log; fail "did not stop at EOS"; }

# all one-digit sums, batch mode (the 'want' key is carried through to the output)
a=0
while [ $a -le 9 ]; do
    b=0
    while [ $b -le 9 ]; do
        printf '{"prompt": "%d+%d=", "want": "%d\\n"}\n' $a $b $((a + b))
        b=$((b + 1))
    done
    a=$((a + 1))
done > sums.jsonl
"$GEN" ck --byte-tokens --prompts sums.jsonl --out answers.jsonl || fail "batch generate"
wrong=$(awk -F'"' '{ if ($8 != $12) print $4 " -> " $12 }' answers.jsonl)
n_wrong=$(printf '%s' "$wrong" | grep -c .)
[ "$n_wrong" -le 2 ] || fail "$n_wrong of 100 sums wrong (final loss $last): $wrong"
echo "final loss $last; 3+4= -> 7; $((100 - n_wrong))/100 sums right"
