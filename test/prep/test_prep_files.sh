#!/bin/sh
# ftmpi-prep's outputs (issue 23):
#  3. an output naming an input (-o a.jsonl a.jsonl, by another spelling or a hard link),
#     the tokenizer, or the other output (--eval-out same.h5 -o same.h5) is refused with
#     one line (exit 1) and every file is left as it was;
#  6. -o onto a nearly full file system, on 1 and 2 ranks: one line saying so, exit 1, no
#     segfault, no .tmp left (a tmpfs; needs root, else that part is skipped).
. "$(dirname "$0")/lib.sh"
T="$REAL_TOK/llama3/tokenizer.json"
make_corpus a.jsonl 200
before=$(cksum < a.jsonl)
refused() { # refused PATTERN WHAT ARGS...
    pat=$1 what=$2; shift 2
    timeout 20 "$PREP" "$@" > o.log 2> e.log; rc=$?
    [ $rc -eq 1 ] || { cat e.log; fail "$what: exit $rc, expected 1"; }
    [ "$(grep -c . e.log)" -eq 1 ] || { cat e.log; fail "$what: not one line"; }
    grep -qF -- "$pat" e.log || { cat e.log; fail "$what: message lacks '$pat'"; }
    [ "$(cksum < a.jsonl)" = "$before" ] || fail "$what: the input changed"
    echo "$what: $(cat e.log)"
}
refused "-o a.jsonl: is the same file as input a.jsonl" "-o equal to the input" \
    -t "$T" -o a.jsonl --seq-len 64 a.jsonl
refused "-o ./a.jsonl: is the same file as input a.jsonl" "-o the input by another spelling" \
    -t "$T" -o ./a.jsonl --seq-len 64 a.jsonl
ln a.jsonl hard.jsonl
refused "-o hard.jsonl: is the same file as input a.jsonl" "-o a hard link of the input" \
    -t "$T" -o hard.jsonl --seq-len 64 a.jsonl
cp "$T" tok.json
refused "-o tok.json: is the same file as -t tok.json" "-o equal to the tokenizer" \
    -t tok.json -o tok.json --seq-len 64 a.jsonl
cmp -s tok.json "$T" || fail "the tokenizer changed"
refused "--eval-out same.h5: is the same file as -o same.h5" "--eval-out equal to -o (new)" \
    -t "$T" -o same.h5 --eval-out same.h5 --eval-fraction 0.1 --seq-len 64 a.jsonl
[ -e same.h5 ] && fail "same.h5 written"
"$PREP" -t "$T" -o same.h5 --seq-len 64 a.jsonl > /dev/null 2>&1 || fail "prep"
refused "--eval-out ./same.h5: is the same file as -o same.h5" "--eval-out equal to -o (existing)" \
    -t "$T" -o same.h5 --eval-out ./same.h5 --eval-fraction 0.1 --seq-len 64 a.jsonl

# 6. a nearly full disk
mkdir small
if ! mount -t tmpfs -o size=64k tmpfs small 2>/dev/null; then
    echo "SKIP part: cannot mount a tmpfs (needs root)"; exit 0
fi
trap 'umount "$SCRATCH/small"; rm -rf "$SCRATCH"' EXIT
make_corpus big.jsonl 2000
n=1; have_mpirun && n="1 2"
for r in $n; do
    timeout 60 sh -c "$(if [ $r -eq 1 ]; then echo "\"$PREP\""; else echo "\"$MPIRUN\" --oversubscribe -np $r \"$PREP\""; fi) -t \"$T\" -o small/out.h5 --seq-len 256 big.jsonl" > o.log 2> e.log
    rc=$?
    [ $rc -eq 1 ] || { cat e.log; fail "full disk, $r rank(s): exit $rc, expected 1"; }
    grep -Eq "Segmentation|MPI_ABORT|ORTE_ERROR_LOG" e.log && { cat e.log; fail "full disk, $r rank(s): crash or abort"; }
    [ "$(grep -c '^ftmpi-prep: ' e.log)" -eq 1 ] || { cat e.log; fail "full disk, $r rank(s): not one line"; }
    grep -q "small/out.h5.tmp: cannot allocate .* MB: No space left on device" e.log || { cat e.log; fail "full disk, $r rank(s): the line does not say the disk is full"; }
    [ -z "$(ls small)" ] || { ls -la small; fail "full disk, $r rank(s): files left behind"; }
    echo "-o on a full disk, $r rank(s): $(grep '^ftmpi-prep: ' e.log)"
done
