#!/bin/sh
# Every family's BOS, EOS and PAD as transformers reads the real tokenizer files (goldens of
# test/tokenizer/gen_special_tokens.py): `ftmpi-tok info` must name the same ids, and the
# text a prompt becomes without a template must start as transformers' encode(text,
# add_special_tokens=True) does: Qwen3's null bos_token means no BOS (it once fell back to
# the id of "<s>", an ordinary token there). Needs FT_SRCDIR, FT_BUILDDIR.
set -u
src=${FT_SRCDIR:-.}
build=${FT_BUILDDIR:-.}
tok=$build/ftmpi-tok
gen=$build/ftmpi-generate
golden=$src/test/tokenizer/golden_special_tokens.jsonl
fail=0
field() { sed -n "s/.*\"$1\":\(-\{0,1\}[0-9]*\).*/\1/p"; }
n=0
while IFS= read -r line; do
    dir=$(printf '%s' "$line" | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p')
    # a real tokenizer (its JSON committed as tokenizer.json.xz) is read from the build tree,
    # where make check unpacks it (test/data/Makefile.inc)
    base=$src
    [ -f "$src/test/data/tokenizers/$dir/tokenizer.json.xz" ] && base=$build
    path=$base/test/data/tokenizers/$dir/tokenizer.json
    info=$("$tok" info "$path") || { echo "FAIL: $dir: ftmpi-tok info failed"; fail=1; continue; }
    for k in bos_id eos_id pad_id; do
        want=$(printf '%s' "$line" | field "$k")
        got=$(printf '%s' "$info" | field "$k")
        if [ "$got" != "$want" ]; then
            echo "FAIL: $dir: $k is $got, transformers says $want"
            fail=1
        fi
    done
    want=$(printf '%s' "$line" | sed -n 's/.*"hi_ids":\[\([0-9,]*\)\].*/\1/p')
    got=$("$gen" --tokenizer "$path" --template none --prompt-ids hi) ||
        { echo "FAIL: $dir: ftmpi-generate --prompt-ids failed"; fail=1; continue; }
    if [ "$got" != "$want" ]; then
        echo "FAIL: $dir: \"hi\" without a template is $got, transformers gives $want"
        fail=1
    fi
    n=$((n + 1))
    echo "ok: $dir"
done < "$golden"
[ "$n" -ge 10 ] || { echo "FAIL: only $n directories checked"; fail=1; }
exit $fail
