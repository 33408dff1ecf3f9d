#!/bin/sh
# One tokenizer per run (train/tok_check.h, io/tok_fingerprint.h): data, an eval set or a
# --tokenizer made for another model is refused at start-up with one line naming both
# files and the override, exit 2, where it used to train or answer nonsense with exit 0.
# Files that record no fingerprint (older files, synthetic data) are accepted as before.
# The fingerprint is that of doc/formats.md: the same for a tokenizer.json re-saved with
# other formatting and key order, another for a changed vocabulary.
. "$(dirname "$0")/lib.sh"
have_mpirun || skip "mpirun not found"
PREP="$B/ftmpi-prep" GENERATE="$B/ftmpi-generate" CONVERT="$B/ftmpi-convert" TOK="$B/ftmpi-tok"
F="$S/test/data/tokenizers/families"
# the model's (856 ids: its vocabulary, so every id it samples decodes) and another (705)
TA="$F/mistral/tokenizer.json" TB="$F/qwen2/tokenizer.json"
fp_of() { "$TOK" info "$1" | sed -n 's/.*"fingerprint":"\([0-9a-f]*\)".*/\1/p'; }
attr_of() { h5dump -a tokenizer_fingerprint "$1" 2>/dev/null | sed -n 's/.*(0): "\([0-9a-f]*\)".*/\1/p'; }
fpa=$(fp_of "$TA") fpb=$(fp_of "$TB")
[ -n "$fpa" ] && [ -n "$fpb" ] && [ "$fpa" != "$fpb" ] || fail "fingerprints '$fpa' '$fpb'"

# the definition: formatting and key order do not count, the vocabulary does
if command -v python3 >/dev/null 2>&1; then
    python3 - "$TA" <<'PY' || fail "python"
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
json.dump(t, open("resaved.json", "w", encoding="utf-8"), indent=3, sort_keys=True)
json.dump(t, open("ascii.json", "w"), ensure_ascii=True, separators=(",", ":"))
v = t["model"]["vocab"]
k = next(iter(v))
v[k + "x"] = v.pop(k)
json.dump(t, open("changed.json", "w", encoding="utf-8"))
PY
    [ "$(fp_of resaved.json)" = "$fpa" ] || fail "re-saved tokenizer.json: another fingerprint"
    [ "$(fp_of ascii.json)" = "$fpa" ] || fail "\\u-escaped tokenizer.json: another fingerprint"
    [ "$(fp_of changed.json)" != "$fpa" ] || fail "a changed vocabulary kept the fingerprint"
    echo "fingerprint: formatting-independent, vocabulary-dependent"
    # doc/formats.md defines it precisely enough to compute it again from the text alone:
    # byte-level and SentencePiece tokenizers (normalizer, byte fallback), string and
    # pair merges, added tokens
    for t in "$TA" "$TB" "$REAL_TOK/llama2/tokenizer.json" "$REAL_TOK/qwen3/tokenizer.json"; do
        want=$(python3 "$S/test/train/tok_fingerprint_ref.py" "$t") || fail "reference on $t"
        [ "$(fp_of "$t")" = "$want" ] || fail "$t: fingerprint $(fp_of "$t"), the definition gives $want"
    done
    echo "fingerprint: equal to doc/formats.md's definition computed independently"
fi

"$PREP" -q -t "$TA" -o a.h5 --seq-len 512 "$S/test/prep/alpaca_sample.jsonl" || fail "prep a"
"$PREP" -q -t "$TB" -o b.h5 --seq-len 512 "$S/test/prep/alpaca_sample.jsonl" || fail "prep b"
[ "$(attr_of a.h5)" = "$fpa" ] && [ "$(attr_of b.h5)" = "$fpb" ] || fail "prep: fingerprint attribute"
"$GENDATA" --rows 32 --seq-len 512 --digits 2 old.h5 >/dev/null || fail "gendata"

write_small_cfg s.cfg
sed -i 's/vocab_size = 259/vocab_size = 856/; s/max_position_embeddings = 64/max_position_embeddings = 512/' s.cfg
common="global_batch_size=4 micro_batch_size=2 max_steps=1 optimizer.warmup_steps=0"
run_ranks 2 s.cfg $common data.train=a.h5 final_weights=m.h5 checkpoint_dir=ck > r.log 2>&1 ||
    { cat r.log; fail "training on a.h5"; }
[ "$(attr_of m.h5)" = "$fpa" ] || fail "final_weights does not record the run's tokenizer"
[ "$(attr_of "ck/$(cat ck/latest)")" = "$fpa" ] || fail "the checkpoint does not record it"
sed '/^model = {/,/^};/d' s.cfg > w.cfg && echo 'model = { weights = "m.h5"; };' >> w.cfg

refused() { # PATTERN WHAT COMMAND...: exit 2, one line holding PATTERN, no MPI noise
    pat=$1 what=$2; shift 2
    "$@" > o.log 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || { cat o.log; fail "$what: exit $rc, not 2"; }
    [ "$(grep -c '^ftmpi' o.log)" -eq 1 ] || { cat o.log; fail "$what: not one line"; }
    grep -q -- "$pat" o.log || { cat o.log; fail "$what: message lacks '$pat'"; }
    grep -Eq "MPI_ABORT|rank [0-9]+:" o.log && { cat o.log; fail "$what: per-rank or abort noise"; }
    echo "$what: $(grep '^ftmpi' o.log)"
}
refused "data.train b.h5 was made with another tokenizer than model.weights m.h5" "data" \
    run_ranks 2 w.cfg $common data.train=b.h5
refused "data.eval b.h5 was made with another tokenizer than data.train a.h5" "eval data" \
    run_ranks 2 s.cfg $common data.train=a.h5 data.eval=b.h5
refused "data.train b.h5 was made with another tokenizer than model.weights m.h5" "--eval-only" \
    run_ranks 2 --eval-only w.cfg $common data.train=b.h5 eval_batches=1
refused "allow_tokenizer_mismatch = true" "the override is named" \
    run_ranks 2 w.cfg $common data.train=b.h5
run_ranks 2 w.cfg $common data.train=b.h5 allow_tokenizer_mismatch=true > o.log 2>&1 ||
    { cat o.log; fail "allow_tokenizer_mismatch = true refused"; }
run_ranks 2 w.cfg $common data.train=old.h5 > o.log 2>&1 || { cat o.log; fail "data without a fingerprint refused"; }
echo "override and old data: accepted"

gen="--template none --max-new-tokens 2"
refused "--tokenizer $TB is not the tokenizer of m.h5" "generate" "$GENERATE" m.h5 --tokenizer "$TB" $gen hello
refused "is not the tokenizer of ck/" "generate on a checkpoint directory" \
    "$GENERATE" ck --tokenizer "$TB" $gen hello
"$GENERATE" m.h5 --tokenizer "$TA" $gen hello > o.log 2>&1 || { cat o.log; fail "generate with the model's tokenizer"; }
# (the other tokenizer may not decode what the model samples: only the check is tested)
"$GENERATE" m.h5 --tokenizer "$TB" --allow-tokenizer-mismatch $gen hello > o.log 2>&1
[ $? -ne 2 ] && ! grep -q "is not the tokenizer" o.log || { cat o.log; fail "--allow-tokenizer-mismatch"; }
echo "generate: the model's tokenizer and the override accepted"

# ftmpi-convert export takes a checkpoint directory's latest, as ftmpi-generate does
"$CONVERT" export -q ck hf-out || fail "export of a checkpoint directory"
[ -s hf-out/config.json ] && [ -s hf-out/model.safetensors ] || fail "export of ck: no HF files"
mkdir empty-ck && "$CONVERT" export -q empty-ck x 2> e.log
[ $? -eq 1 ] && grep -q "empty-ck is a directory without a 'latest' checkpoint pointer" e.log ||
    { cat e.log; fail "export of a directory without latest"; }
echo "export: a checkpoint directory is its latest"

# import records the HF directory's tokenizer
mkdir hf && for f in "$S/test/data/convert/tiny_fp32"/*; do ln -s "$f" hf/; done && cp "$TA" hf/tokenizer.json
"$CONVERT" import -q hf i.h5 || fail "import"
[ "$(attr_of i.h5)" = "$fpa" ] || fail "import: no tokenizer fingerprint recorded"
rm hf/tokenizer.json && "$CONVERT" import -q hf j.h5 || fail "import without tokenizer"
[ -z "$(attr_of j.h5)" ] || fail "import without tokenizer.json recorded a fingerprint"
echo "import: records the directory's tokenizer"
