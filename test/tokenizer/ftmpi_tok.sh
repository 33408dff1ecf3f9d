#!/bin/sh
# ftmpi-tok end to end: JSONL encode matches the reference vectors, decode -> encode gives the
# same ids back, --no-special treats special-token text as plain text, and bad input fails
# with a message naming the line. Needs FT_BUILDDIR (set by `make check`): the real tokenizers'
# directories are those make check lays out in the build tree (test/data/Makefile.inc).
set -u
tool=${FT_BUILDDIR:-.}/ftmpi-tok
data=${FT_BUILDDIR:-.}/test/data/tokenizers
tmp=${TMPDIR:-/tmp}/ftmpi_tok_test.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, command status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}

for pair in llama3:vectors.jsonl llama3.1:vectors_special.jsonl llama2:vectors.jsonl; do
    dir=${pair%%:*}
    vec=$data/$dir/${pair#*:}
    tj=$data/$dir/tokenizer.json
    # "ids" is the last member of every vector line
    sed 's/.*"ids":\(\[[^]]*\]\)}$/{"ids":\1}/' "$vec" > "$tmp/expect"
    "$tool" encode "$tj" < "$vec" > "$tmp/got"
    check "$dir encode exit status" $?
    cmp -s "$tmp/expect" "$tmp/got"
    check "$dir encode ids equal the vectors" $?
    "$tool" decode "$tj" < "$tmp/got" > "$tmp/text" && "$tool" encode "$tj" < "$tmp/text" > "$tmp/again"
    check "$dir decode exit status" $?
    cmp -s "$tmp/got" "$tmp/again"
    check "$dir encode(decode(ids)) == ids" $?
done

tj=$data/llama3/tokenizer.json
printf '%s\n' '{"text":"<|eot_id|>"}' | "$tool" encode "$tj" > "$tmp/sp"
printf '%s\n' '{"ids":[128009]}' | cmp -s - "$tmp/sp"
check "special token matched by default" $?
printf '%s\n' '{"text":"<|eot_id|>"}' | "$tool" encode --no-special "$tj" > "$tmp/plain"
grep -q 128009 "$tmp/plain"
[ $? -ne 0 ]
check "--no-special encodes special text as plain text" $?
printf '%s\n' '{"ids":[128000,9906]}' | "$tool" decode --skip-special "$tj" > "$tmp/skip"
printf '%s\n' '{"text":"Hello"}' | cmp -s - "$tmp/skip"
check "--skip-special drops special tokens" $?

printf '%s\n' '{"text":"ok"}' '{"text":3}' | "$tool" encode "$tj" > /dev/null 2> "$tmp/err"
st=$?
[ $st -eq 1 ] && grep -q 'stdin:2: expected a string member "text"' "$tmp/err"
check "bad input line is reported with its number" $?
printf '%s\n' '{"ids":[999999]}' | "$tool" decode "$tj" > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q 'id 999999 at position 0 is not in the vocabulary' "$tmp/err"
check "out-of-range id is reported" $?
"$tool" encode "$tmp/missing.json" < /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q 'missing.json: cannot open' "$tmp/err"
check "missing tokenizer file is reported" $?

exit $fail
