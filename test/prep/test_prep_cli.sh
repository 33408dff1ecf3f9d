#!/bin/sh
# Command line: --help, encode/decode subcommands, format auto-detection (dolly, samsum, text,
# JSON array), raw text input, custom prompt templates, Llama 3.1 defaults, file attributes,
# the output as -o or as the last argument.
. "$(dirname "$0")/lib.sh"
T3="$REAL_TOK/llama3/tokenizer.json"
"$PREP" --help > help.txt || fail "--help exit status"
grep -q 'EXIT STATUS' help.txt && grep -q -- '--pack greedy|ffd|none' help.txt || fail "--help text"

# encode / decode (JSONL, no BOS; dataset text is plain text unless --allow-special)
printf '%s\n' '{"text":"Hello world!"}' | "$PREP" encode -t "$T3" > ids.jsonl || fail "encode"
printf '%s\n' '{"ids":[9906,1917,0]}' | cmp -s - ids.jsonl || fail "encode ids: $(cat ids.jsonl)"
"$PREP" decode -t "$T3" < ids.jsonl > text.jsonl || fail "decode"
printf '%s\n' '{"text":"Hello world!"}' | cmp -s - text.jsonl || fail "decode text: $(cat text.jsonl)"
printf '%s\n' '{"text":"<|eot_id|>"}' | "$PREP" encode -t "$T3" | grep -q 128009 && fail "encode parsed a special"
printf '%s\n' '{"text":"<|eot_id|>"}' | "$PREP" encode --allow-special -t "$T3" | grep -q '\[128009\]' ||
    fail "encode --allow-special"

fmt_of() { sed -n 's/.*template \([^,]*\), format \([a-z]*\),.*/\1 \2/p' "$1"; }
printf '%s\n' '{"instruction":"Name a color.","context":"","response":"Blue","category":"open_qa"}' > dolly.jsonl
printf '%s\n' '{"id":"1","dialogue":"A: hi\nB: hello","summary":"They greet."}' > samsum.jsonl
printf '%s\n' '{"text":"Just some text."}' '{"text":"More text."}' > text.jsonl
printf '%s\n' '[{"instruction":"a","input":"","output":"b"},' '{"instruction":"c","input":"d","output":"e"}]' > arr.json
for f in dolly:alpaca samsum:alpaca text:text arr.json:alpaca; do
    in=${f%%:*}; [ -e "$in" ] || in=$in.jsonl
    "$PREP" -t "$T3" -o o.h5 --seq-len 64 "$in" > log || fail "$in"
    want="${f#*:} ${in%%.*}"; [ "$in" = arr.json ] && want="alpaca alpaca"
    [ "$(fmt_of log)" = "$want" ] || { cat log; fail "$in detected as '$(fmt_of log)', want '$want'"; }
done
# samsum uses the fixed instruction
"$PREP" -q -t "$T3" -o o.h5 --seq-len 128 --dump-examples s.jsonl samsum.jsonl || fail samsum
sed 's/.*"ids":\(\[[^]]*\]\).*/{"ids":\1}/' s.jsonl | "$PREP" decode -t "$T3" | grep -q 'Summarize this dialogue.' ||
    fail "samsum instruction"

# raw text: one document per line, or per file; all tokens but the first are targets
printf 'first document\n\nsecond document\n' > raw.txt
"$PREP" -t "$T3" -o raw.h5 --seq-len 32 --text --dump-examples raw.jsonl raw.txt > log || fail "--text"
[ "$(wc -l < raw.jsonl)" -eq 2 ] || fail "--text: 2 documents expected"
grep -q '"mask":\[0,1,1,1\]' raw.jsonl || fail "--text mask: $(cat raw.jsonl)"
"$PREP" -q -t "$T3" -o raw.h5 --seq-len 32 --text --text-unit file --dump-examples raw1.jsonl raw.txt || fail "--text-unit file"
[ "$(wc -l < raw1.jsonl)" -eq 1 ] || fail "--text-unit file: 1 document expected"

# custom prompt template with a special token in it
printf '<|start_header_id|>user<|end_header_id|>\n\n{instruction}{input}<|eot_id|>' > p.txt
"$PREP" -q -t "$T3" -o c.h5 --seq-len 64 --prompt-template p.txt --dump-examples c.jsonl dolly.jsonl || fail "custom template"
grep -q '^{"ids":\[128000,128006,882,128007,271,' c.jsonl && grep -q '128009,' c.jsonl || fail "custom template ids: $(cat c.jsonl)"
h5dump -a template c.h5 | grep -q '"alpaca-custom"' || fail "custom template attribute"

# Llama 3.1: pad <|finetune_right_pad_id|> (128004); chat EOS <|eot_id|>; dated system block
printf '%s\n' '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}]}' > chat.jsonl
"$PREP" -q -t "$REAL_TOK/llama3.1/tokenizer.json" -o c31.h5 --seq-len 64 --template llama3.1-chat \
    --dump-examples c31.jsonl chat.jsonl || fail "llama3.1-chat"
h5dump -a pad_token_id c31.h5 | grep -q '128004' || fail "3.1 pad id"
h5dump -a eos_token_id c31.h5 | grep -q '128009' || fail "3.1 eos id"
sed 's/.*"ids":\(\[[^]]*\]\).*/{"ids":\1}/' c31.jsonl | "$PREP" decode -t "$REAL_TOK/llama3.1/tokenizer.json" |
    grep -q 'Today Date: 26 Jul 2024' || fail "3.1 system block"
hash=$("$B/ftmpi-tok" info "$T3" 2>/dev/null | sed 's/.*"hash":"\([0-9a-f]*\)".*/\1/')
[ -z "$hash" ] || h5dump -a tokenizer_hash o.h5 | grep -q "$hash" || fail "tokenizer_hash attribute"
"$PREP" -t "$T3" -o o.h5 --format chat dolly.jsonl 2> e.log; [ $? -eq 1 ] || fail "wrong format must fail"
"$PREP" -t "$T3" -o o.h5 --template llama2-chat dolly.jsonl 2> e.log; [ $? -eq 1 ] && grep -q 'template does not fit' e.log ||
    fail "template/format mismatch"
# a template name that is not one: the option and the valid names, exit 2
"$PREP" -t "$T3" -o o.h5 --template smollm2 dolly.jsonl 2> e.log; [ $? -eq 2 ] || fail "--template smollm2: exit"
grep -q -- "--template 'smollm2' is not a template name; use one of: .*smollm2-chat" e.log ||
    fail "--template smollm2: $(cat e.log)"
"$PREP" -t "$T3" -o o.h5 --seq-len abc dolly.jsonl 2> e.log; grep -q -- "bad value 'abc' for --seq-len" e.log ||
    fail "--seq-len abc: $(cat e.log)"
# The output as the last argument (INPUT... OUT.h5) writes what -o writes; a name ending in .h5
# anywhere else, or beside -o, and a missing output are one usage line each, exit 2, nothing written.
"$PREP" -q -t "$T3" --seq-len 64 dolly.jsonl pos.h5 || fail "positional output"
"$PREP" -q -t "$T3" --seq-len 64 -o opt.h5 dolly.jsonl || fail "-o output"
[ "$(h5dump pos.h5 | tail -n +2)" = "$(h5dump opt.h5 | tail -n +2)" ] || fail "positional output differs from -o"
usage_error() { # WANT ARGS...: exit 2, exactly the one line WANT on stderr, no file written
    want=$1; shift
    rm -f u1.h5 u2.h5
    "$PREP" -q -t "$T3" --seq-len 64 "$@" > u.out 2> u.err; rc=$?
    [ $rc -eq 2 ] || fail "$*: exit $rc, want 2 ($(cat u.err))"
    [ "$(cat u.err)" = "ftmpi-prep: $want; see ftmpi-prep --help" ] || fail "$*: stderr '$(cat u.err)'"
    [ ! -s u.out ] && [ ! -e u1.h5 ] && [ ! -e u2.h5 ] || fail "$*: wrote something"
}
usage_error "two outputs: --out 'u1.h5' and 'u2.h5' (an argument ending in .h5 is an output, inputs are JSON or text); give the output once" \
    -o u1.h5 dolly.jsonl u2.h5
usage_error "two outputs: 'u1.h5' and 'u2.h5' (an argument ending in .h5 is an output, inputs are JSON or text); give one output, last" \
    dolly.jsonl u1.h5 u2.h5
usage_error "'u1.h5' ends in .h5 but is not the last argument; the output goes last (INPUT... OUT.h5) or after -o" \
    u1.h5 dolly.jsonl
cp dolly.jsonl dolly2.jsonl
usage_error "no output file: give -o OUT, or name the output last with .h5 at the end (INPUT... OUT.h5); 'dolly2.jsonl' is read as an input" \
    dolly.jsonl dolly2.jsonl
cmp -s dolly.jsonl dolly2.jsonl || fail "the last input was overwritten"
usage_error "no output file: give -o OUT, or name the output last (INPUT... OUT.h5)"
usage_error "no input files" u1.h5
grep -q 'INPUT\.\.\. OUT\.h5' help.txt || fail "--help: positional output"
echo "ok: cli"
