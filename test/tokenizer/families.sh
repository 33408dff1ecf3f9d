#!/bin/sh
# Tokenizer families beyond Llama (Qwen2/2.5/3, GPT-NeoX/Pythia/Dolly v2, GPT-J, Mistral v0.3,
# the Digits pre-tokenizer of SmolLM2/StarCoder in four placements): ftmpi-tok encode and
# decode must equal HF `tokenizers` byte for byte on the tricky strings of
# test/data/tokenizers/families/*/ (made by test/tokenizer/gen_families.py), and so must the
# real Qwen3 tokenizer.json of test/data/tokenizers/qwen3/ (the directory make check lays out in
# the build tree, test/data/Makefile.inc); an unsupported component is one error line naming
# it. Needs FT_SRCDIR, FT_BUILDDIR.
set -u
src=${FT_SRCDIR:-.}
tool=${FT_BUILDDIR:-.}/ftmpi-tok
data=$src/test/data/tokenizers/families
qwen3=${FT_BUILDDIR:-.}/test/data/tokenizers/qwen3
tmp=${TMPDIR:-/tmp}/ftmpi_tok_families.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, command status
    if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi
}

for fam in qwen2 gpt-neox gpt-j mistral gpt2-prefix digits digits-runs digits-after-bytelevel \
    digits-after-bytelevel-single qwen3; do
    d=$data/$fam
    [ "$fam" = qwen3 ] && d=$qwen3
    "$tool" encode "$d/tokenizer.json" < "$d/text.jsonl" > "$tmp/ids"
    check "$fam encode exit status" $?
    cmp "$d/ids.jsonl" "$tmp/ids"
    check "$fam encode ids equal HF" $?
    "$tool" decode "$d/tokenizer.json" < "$d/ids.jsonl" > "$tmp/text"
    check "$fam decode exit status" $?
    cmp "$d/decoded.jsonl" "$tmp/text"
    check "$fam decoded text equals HF" $?
done

# An unsupported normalizer is refused at load time with one line naming it.
sed 's/"normalizer":{"type":"NFC"}/"normalizer":{"type":"NFKD"}/' "$data/qwen2/tokenizer.json" \
    > "$tmp/nfkd.json"
printf '%s\n' '{"text":"x"}' | "$tool" encode "$tmp/nfkd.json" > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q 'normalizer: normalizer type "NFKD" is not supported' "$tmp/err" &&
    [ "$(wc -l < "$tmp/err")" -eq 1 ]
check "unsupported normalizer named in one error line" $?

exit $fail
