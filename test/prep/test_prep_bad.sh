#!/bin/sh
# Bad records: each kind is reported as FILE:LINE: problem, skipped and counted; --strict
# exits 1 and writes nothing; usage errors exit 2.
. "$(dirname "$0")/lib.sh"
T="$REAL_TOK/llama3/tokenizer.json"
good='{"instruction":"Say hi","input":"","output":"hi"}'
{
    echo "$good"                                              # 1
    echo '{"instruction": "unterminated"'                     # 2 invalid JSON
    echo '["an", "array"]'                                    # 3 not an object
    echo '{"instruction":"no output"}'                        # 4 missing field (alpaca by line 1)
    echo '{"instruction":"x","input":3,"output":"y"}'         # 5 wrong type
    printf '{"instruction":"bad \377 byte","output":"y"}\n'   # 6 not UTF-8
    echo ''                                                   # 7 blank: ignored
    echo "$good"                                              # 8
} > bad.jsonl
"$PREP" -t "$T" -o out.h5 --seq-len 64 bad.jsonl > out.log 2> err.log || { cat err.log; fail "default mode must skip bad lines"; }
for want in 'bad.jsonl:2: invalid JSON' 'bad.jsonl:3: not a JSON object' \
    'bad.jsonl:4: missing field "output"' 'bad.jsonl:5: field "input" is not a string' \
    'bad.jsonl:6: not valid UTF-8'; do
    grep -q "^$want" err.log || { cat err.log; fail "not reported: $want"; }
done
grep -q ':7:' err.log && fail "blank line reported"
grep -q '7 records: 2 examples, 5 skipped' out.log || { cat out.log; fail "summary counts"; }

# chat records: roles and structure
{
    echo '{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}'
    echo '{"messages":"not an array"}'
    echo '{"messages":[{"role":"user","content":"only a question"}]}'
    echo '{"messages":[{"role":"robot","content":"a"},{"role":"assistant","content":"b"}]}'
    echo '{"messages":[{"role":"assistant","content":"a"},{"role":"user","content":"b"}]}'
} > chat.jsonl
"$PREP" -t "$REAL_TOK/llama2/tokenizer.json" -o c.h5 --seq-len 64 chat.jsonl > /dev/null 2> cerr.log || fail "chat run"
grep -q 'chat.jsonl:2: field "messages" is not a non-empty array' cerr.log &&
    grep -q 'chat.jsonl:3: no assistant message' cerr.log &&
    grep -q 'chat.jsonl:4: messages\[0\]: role "robot"' cerr.log &&
    grep -q 'chat.jsonl:5: messages\[0\]: roles must alternate' cerr.log || { cat cerr.log; fail "chat problems"; }

rm -f out.h5
"$PREP" -t "$T" -o out.h5 --strict bad.jsonl > /dev/null 2> strict.log
[ $? -eq 1 ] || fail "--strict must exit 1"
grep -q '5 bad records (--strict)' strict.log || { cat strict.log; fail "--strict message"; }
[ -e out.h5 ] && fail "--strict wrote a file"
if have_mpirun; then
    prep_ranks 2 -t "$T" -o out.h5 --strict bad.jsonl > /dev/null 2> strict2.log
    [ $? -ne 0 ] || fail "--strict on 2 ranks must fail"
    grep -q 'bad.jsonl:6: not valid UTF-8' strict2.log || { cat strict2.log; fail "2-rank report"; }
fi

"$PREP" -t "$T" -o out.h5 --pack nope bad.jsonl 2> usage.log; [ $? -eq 2 ] || fail "bad --pack value must exit 2"
"$PREP" -o out.h5 bad.jsonl 2> usage.log; [ $? -eq 2 ] || fail "missing --tokenizer must exit 2"
"$PREP" -t "$T" -o out.h5 missing.jsonl 2> miss.log; [ $? -eq 1 ] || fail "missing input must exit 1"
grep -q 'missing.jsonl: cannot open' miss.log || { cat miss.log; fail "missing input message"; }
echo "ok: bad records reported and counted"
