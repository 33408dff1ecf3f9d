#!/bin/sh
# ftmpi-generate's command line: help, usage errors (exit 2, one clear line), runtime
# errors (exit 1), sampling reproducible from --seed, --top-k 1 == greedy, text
# prompts through a tokenizer and a template, batch mode identical on 1 and 2 ranks.
. "$(dirname "$0")/../train/lib.sh"
GEN="$B/ftmpi-generate"
HF="$S/test/data/hf/hf_basic.h5"   # a weights file: vocab 97, EOS 2, 64 positions
TOK="$S/test/tokenizer/synthetic_bytelevel.json"

# expect_exit CODE PATTERN ARGS...: exits with CODE and says PATTERN on stderr
expect_exit() {
    want=$1 pat=$2; shift 2
    "$GEN" "$@" > out.txt 2> err.txt; got=$?
    [ "$got" -eq "$want" ] || { cat err.txt; fail "exit $got, expected $want: $*"; }
    grep -q -- "$pat" err.txt || { cat err.txt; fail "no '$pat' in the message of: $*"; }
    [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "more than one line for: $*"; }
}

"$GEN" --help > help.txt || fail "--help"
for o in --tokenizer --byte-tokens --ids --template --max-new-tokens --temperature --top-k \
         --top-p --seed --prompts --out --device --no-thinking --prompt-ids "Exit status"; do
    grep -q -- "$o" help.txt || fail "--help does not document $o"
done

# usage errors
expect_exit 2 "no MODEL" --ids
expect_exit 2 "--temperature" --ids "$HF" 1 --temperature -1
expect_exit 2 "--temperature" --ids "$HF" 1 --temperature abc
expect_exit 2 "--top-p" --ids "$HF" 1 --top-p 0
expect_exit 2 "--top-p" --ids "$HF" 1 --top-p 1.5
expect_exit 2 "--top-k" --ids "$HF" 1 --top-k -3
expect_exit 2 "--max-new-tokens" --ids "$HF" 1 --max-new-tokens 1x
expect_exit 2 "--template 'vicuna'" --byte-tokens "$HF" hi --template vicuna
expect_exit 2 "unknown option" --ids "$HF" 1 --bogus
expect_exit 2 "needs a value" --ids "$HF" 1 --seed
expect_exit 2 "needs --tokenizer" --byte-tokens "$HF" hi --template llama3-chat
expect_exit 2 "exclude each other" --byte-tokens --tokenizer "$TOK" "$HF" hi
expect_exit 2 "--prompts needs --out" --ids "$HF" --prompts p.jsonl
expect_exit 2 "tokenizer FILE or --byte-tokens" "$HF" hello
expect_exit 2 "--device" --ids "$HF" 1 --device tpu

# runtime errors
expect_exit 1 "No such file" --ids does-not-exist.h5 1
"$GENDATA" --rows 2 --seq-len 24 d.h5 > /dev/null || fail gendata
expect_exit 1 "is a 'dataset' file" --ids d.h5 1
expect_exit 1 "outside the model's vocabulary" --ids "$HF" 1,97
expect_exit 1 "not a comma-separated list" --ids "$HF" 1,,2
expect_exit 1 "vocab_size is 97" --byte-tokens "$HF" hi
expect_exit 1 "the tokenizer has 263 ids" --tokenizer "$TOK" "$HF" hi
mkdir emptydir
expect_exit 1 "without a 'latest'" --ids emptydir 1

# greedy is deterministic; --top-k 1 is greedy at any temperature
greedy=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 20 --ignore-eos) || fail "greedy run"
[ "$(echo "$greedy" | tr ',' '\n' | wc -l)" -eq 20 ] || fail "expected 20 ids: $greedy"
top1=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 20 --ignore-eos --temperature 1.3 --top-k 1 \
       --seed 9) || fail "top-k 1 run"
[ "$greedy" = "$top1" ] || fail "top-k 1 differs from greedy: $greedy vs $top1"

# sampling: the same seed repeats, another seed differs
s1=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 30 --ignore-eos --temperature 1 --seed 5)
s2=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 30 --ignore-eos --temperature 1 --seed 5)
s3=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 30 --ignore-eos --temperature 1 --seed 6)
[ -n "$s1" ] && [ "$s1" = "$s2" ] || fail "same seed, different samples: $s1 vs $s2"
[ "$s1" != "$s3" ] || fail "seeds 5 and 6 sampled the same 30 tokens"
p1=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 30 --ignore-eos --temperature 0.8 --top-p 0.9 \
     --top-k 20 --seed 5)
p2=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 30 --ignore-eos --temperature 0.8 --top-p 0.9 \
     --top-k 20 --seed 5)
[ "$p1" = "$p2" ] || fail "top-k/top-p sampling not reproducible"

# EOS: the model's EOS (2) or --eos-id ends the completion and is not printed
first=$(echo "$greedy" | cut -d, -f4)
upto=$(echo "$greedy" | awk -F, -v t="$first" '{ for (i = 1; i <= NF && $i != t; i++) printf "%s%s", (i > 1 ? "," : ""), $i; print "" }')
got=$("$GEN" --ids "$HF" 1,5,7 --max-new-tokens 20 --eos-id "$first") || fail "--eos-id run"
[ "$got" = "$upto" ] || fail "--eos-id $first: got '$got', expected '$upto'"

# text through a tokenizer: a model with the tokenizer's 263 ids
"$B/test/generate/write_weights" w263.h5 263 || fail "write_weights"
"$GEN" --tokenizer "$TOK" w263.h5 "hello world" --max-new-tokens 8 --ignore-eos > t1.txt ||
    fail "tokenizer prompt"
"$GEN" --tokenizer "$TOK" w263.h5 --no-bos < /dev/null > /dev/null 2> err.txt &&
    fail "an empty prompt without BOS should fail"
grep -q "prompt is empty" err.txt || fail "no clear message for an empty prompt"
printf 'hello world' | "$GEN" --tokenizer "$TOK" w263.h5 --max-new-tokens 8 --ignore-eos > t2.txt ||
    fail "prompt on stdin"
cmp -s t1.txt t2.txt || fail "prompt from stdin differs from the argument"
"$GEN" --tokenizer "$TOK" w263.h5 "hello world" --max-new-tokens 8 --ignore-eos --echo > t3.txt
[ "$(head -c 11 t3.txt)" = "hello world" ] || fail "--echo does not print the prompt first"
"$GEN" --tokenizer "$TOK" --template alpaca --input "some input" w263.h5 "do it" \
    --max-new-tokens 4 > /dev/null || fail "alpaca template"
expect_exit 1 "needs the token <|begin_of_text|>" --tokenizer "$TOK" --template llama3-chat \
    w263.h5 hi

# Qwen3 prompts (--prompt-ids, no model): the ids of transformers' apply_chat_template
# (add_generation_prompt, enable_thinking true/false) with the real Qwen3 tokenizer files,
# test_generate_cli_qwen3.jsonl (test/prep/gen_golden_qwen3.py); without --template the
# chat_template of its tokenizer_config.json must be recognised as qwen3-chat.
Q3="$REAL_TOK/qwen3/tokenizer.json"
Q3G="$S/test/generate/test_generate_cli_qwen3.jsonl"
golden_ids() { sed -n "${1}s/.*\"ids\":\[\([0-9,]*\)\].*/\1/p" "$Q3G"; }
check_q3() { # golden line, then ftmpi-generate arguments
    line=$1; shift
    got=$("$GEN" --tokenizer "$Q3" --prompt-ids "$@") || fail "qwen3 prompt: $*"
    [ "$got" = "$(golden_ids "$line")" ] || fail "qwen3 prompt ids differ from HF: $*: $got"
}
hello="Hello, naïve 12 世界"
check_q3 1 --template qwen3-chat "$hello"
check_q3 2 --template qwen3-chat --no-thinking "$hello"
check_q3 3 --template qwen3-chat --system "Be brief." "What is 2+2?"
check_q3 4 --system "Be brief." --no-thinking "What is 2+2?" # recognised: no --template
expect_exit 2 "--no-thinking is for --template qwen3-chat" --tokenizer "$Q3" --template chatml \
    --no-thinking --prompt-ids hi
expect_exit 2 "--prompt-ids needs --tokenizer" --byte-tokens --prompt-ids hi
# one name per template: llama3.1-chat, as ftmpi-prep spells it; the former llama31-chat
# frames the same ids, with a note
L31="$REAL_TOK/llama3.1/tokenizer.json"
a=$("$GEN" --tokenizer "$L31" --template llama3.1-chat --prompt-ids hi) || fail "llama3.1-chat"
b=$("$GEN" --tokenizer "$L31" --template llama31-chat --prompt-ids hi 2> note.txt) || fail "llama31-chat"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "llama31-chat frames other ids than llama3.1-chat"
grep -q "llama31-chat is spelt llama3.1-chat" note.txt || fail "no note for the former spelling"
# SmolLM2 (ChatML + its default system turn) on the tiny Digits + ByteLevel tokenizer whose
# tokenizer_config.json holds SmolLM2-Instruct's chat_template: apply_chat_template's ids
# (test_generate_cli_smollm2.jsonl, test/prep/gen_golden_chatml.py), named and recognised.
SM="$S/test/data/tokenizers/families/digits/tokenizer.json"
SMG="$S/test/generate/test_generate_cli_smollm2.jsonl"
sm_ids() { sed -n "${1}s/.*\"ids\":\[\([0-9,]*\)\].*/\1/p" "$SMG"; }
got=$("$GEN" --tokenizer "$SM" --template smollm2-chat --prompt-ids "Hello, naïve 12 世界 x1y22") &&
    [ "$got" = "$(sm_ids 1)" ] || fail "smollm2-chat prompt ids differ from HF: $got"
got=$("$GEN" --tokenizer "$SM" --template smollm2-chat --system "Be brief." --prompt-ids \
      "What is 2+2?") && [ "$got" = "$(sm_ids 2)" ] || fail "smollm2-chat with --system: $got"
got=$("$GEN" --tokenizer "$SM" --prompt-ids "Hello, naïve 12 世界 x1y22") &&
    [ "$got" = "$(sm_ids 1)" ] || fail "SmolLM2's chat_template not recognised: $got"
got=$(printf '%s' "Hello, naïve 12 世界 x1y22" | "$GEN" --tokenizer "$SM" --prompt-ids) &&
    [ "$got" = "$(sm_ids 1)" ] || fail "--prompt-ids with the prompt on standard input: $got"
# an unknown chat_template: one line naming the file and --template, exit 2; --template wins
mkdir -p unk
cp "$S/test/data/tokenizers/families/qwen2/tokenizer.json" unk/
sed 's/You are Qwen, created by Alibaba Cloud/You are SmolLM/g' \
    "$S/test/data/tokenizers/families/qwen2/tokenizer_config.json" > unk/tokenizer_config.json
expect_exit 2 "unk/tokenizer_config.json: chat_template is not one ftmpi knows.*--template" \
    --tokenizer unk/tokenizer.json --prompt-ids hi
"$GEN" --tokenizer unk/tokenizer.json --template chatml --prompt-ids hi > /dev/null ||
    fail "--template chatml over an unknown chat_template"
# and the recognised template is what a real run uses: Qwen2.5's default system turn is there
"$GEN" --tokenizer "$S/test/data/tokenizers/families/qwen2/tokenizer.json" --prompt-ids hi > a.txt &&
"$GEN" --tokenizer "$S/test/data/tokenizers/families/qwen2/tokenizer.json" --template qwen2.5-chat \
    --prompt-ids hi > b.txt && cmp -s a.txt b.txt || fail "Qwen2.5's chat_template not recognised"

# batch mode: same file from 1 and 2 ranks, in input order; line i = prompt i alone
{
    echo '{"id": "a", "prompt": "hello world"}'
    echo '{"id": "b", "prompt": "the quick brown fox"}'
    echo ''
    echo '{"id": "c", "prompt": "<L> word <R>"}'
    echo '{"id": "d", "prompt": "x"}'
    echo '{"id": "e", "prompt": "hello again"}'
} > prompts.jsonl
common="--tokenizer $TOK w263.h5 --max-new-tokens 6 --temperature 0.9 --seed 3"
"$GEN" $common --prompts prompts.jsonl --out b1.jsonl || fail "batch, 1 rank"
[ "$(wc -l < b1.jsonl)" -eq 5 ] || fail "batch output has $(wc -l < b1.jsonl) lines, expected 5"
sed -n 's/.*"id":"\([a-e]\)".*/\1/p' b1.jsonl | tr -d '\n' | grep -qx abcde || fail "order"
grep -q '"completion":' b1.jsonl && grep -q '"ids":\[' b1.jsonl && grep -q '"stop":' b1.jsonl ||
    fail "batch output lacks completion/ids/stop: $(head -n 1 b1.jsonl)"
if have_mpirun; then
    "$MPIRUN" --oversubscribe -np 2 "$GEN" $common --prompts prompts.jsonl --out b2.jsonl ||
        fail "batch, 2 ranks"
    cmp b1.jsonl b2.jsonl || { diff b1.jsonl b2.jsonl; fail "1 and 2 ranks differ"; }
    "$MPIRUN" --oversubscribe -np 2 "$GEN" --ids "$HF" 1 > /dev/null 2> err.txt &&
        fail "a single prompt on 2 ranks should be refused"
    grep -q "use --prompts" err.txt || fail "no hint for a single prompt on 2 ranks"
fi
# ids batch mode, and a bad line is named
printf '{"ids": [1, 5, 7]}\n{"ids": [3]}\n' > ids.jsonl
"$GEN" --ids "$HF" --max-new-tokens 20 --ignore-eos --prompts ids.jsonl --out bi.jsonl ||
    fail "ids batch"
head -n 1 bi.jsonl | grep -q "\"ids\":\[$greedy\]" || fail "ids batch line 1 != single run"
printf '{"ids": [1]}\n{"prompt": 5}\n' > bad.jsonl
expect_exit 1 "bad.jsonl:2" --ids "$HF" --prompts bad.jsonl --out bo.jsonl
printf '{"prompt": "a"}\nnot json\n' > bad2.jsonl
expect_exit 1 "bad2.jsonl:2: not valid JSON" --tokenizer "$TOK" w263.h5 --prompts bad2.jsonl \
    --out bo.jsonl
[ ! -e bo.jsonl ] || fail "a failed batch left an output file"
echo "ok"
