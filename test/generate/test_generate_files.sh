#!/bin/sh
# ftmpi-generate --out naming one of its inputs (--prompts, --tokenizer, MODEL) is refused
# with one line (exit 2) before anything is read, and the input is left as it was
# (issue 23, item 3).
. "$(dirname "$0")/../train/lib.sh"
GEN="$B/ftmpi-generate"
cp "$S/test/tokenizer/synthetic_bytelevel.json" tok.json
"$B/test/generate/write_weights" w263.h5 263 > /dev/null || fail "write_weights"
echo '{"prompt": "hi"}' > p.jsonl
for pair in "p.jsonl --prompts" "./p.jsonl --prompts" "tok.json --tokenizer" "w263.h5 MODEL"; do
    set -- $pair
    out=$1 opt=$2
    before=$(cksum < "${out#./}")
    "$GEN" --tokenizer tok.json w263.h5 --prompts p.jsonl --out "$out" --max-new-tokens 2 > o.txt 2> e.txt
    rc=$?
    [ $rc -eq 2 ] || { cat e.txt; fail "--out $out: exit $rc, expected 2"; }
    [ "$(grep -c . e.txt)" -eq 1 ] || { cat e.txt; fail "--out $out: not one line"; }
    grep -q -- "--out $out: is the same file as $opt" e.txt || { cat e.txt; fail "--out $out: message"; }
    [ "$(cksum < "${out#./}")" = "$before" ] || fail "--out $out: the input changed"
    echo "--out $out: $(cat e.txt)"
done
"$GEN" --tokenizer tok.json w263.h5 --prompts p.jsonl --out g.jsonl --max-new-tokens 2 > /dev/null 2>&1 || fail "a distinct --out"
[ -s g.jsonl ] || fail "no output"
echo "a distinct --out is written"
