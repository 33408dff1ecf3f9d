#!/bin/sh
# Tokenizer throughput: ftmpi-tok encode (single thread, end to end: JSONL parse + encode +
# write) against HF tokenizers encode_batch on the same texts with the same thread count (1),
# on a generated corpus (default 50 MB, written to /tmp, never committed).
#   usage: bench/tokenizer.sh [BUILD_DIR]      (BUILD_DIR holds ftmpi-tok and the real tokenizers:
#                                               `make ftmpi-tok tokenizer-data`)
#   env:   SIZE_MB (50), TOKENIZERS ("llama3 llama2"), CORPUS (/tmp/ftmpi_tok_bench.jsonl)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${FT_BUILDDIR:-.}}
tool=$build/ftmpi-tok
[ -x "$tool" ] || { echo "bench/tokenizer.sh: $tool not found: run 'make ftmpi-tok' in the build dir and pass it" >&2; exit 1; }
size=${SIZE_MB:-50}
corpus=${CORPUS:-/tmp/ftmpi_tok_bench.jsonl}
python3 -c 'import tokenizers' 2>/dev/null || { echo "bench/tokenizer.sh: pip install tokenizers" >&2; exit 1; }

if [ ! -s "$corpus" ]; then
    python3 "$here/tokenizer_hf.py" gen "$corpus" "$size"
fi
mb=$(python3 -c "import os; print(f'{os.path.getsize(\"$corpus\")/1e6:.1f}')")
echo "corpus: $corpus ($mb MB)"

for name in ${TOKENIZERS:-llama3 llama2}; do
    # committed as tokenizer.json.xz; `make tokenizer-data` unpacks it into the build tree
    tj=$build/test/data/tokenizers/$name/tokenizer.json
    [ -f "$tj" ] || { echo "bench/tokenizer.sh: $tj not found: run 'make tokenizer-data' in $build" >&2; exit 1; }
    out=/tmp/ftmpi_tok_bench_ids.$$.jsonl
    start=$(date +%s.%N)
    "$tool" encode "$tj" < "$corpus" > "$out"
    end=$(date +%s.%N)
    ours=$(python3 - "$out" "$start" "$end" <<'PY'
import json, sys
n = 0
with open(sys.argv[1]) as f:
    for line in f:
        n += line.count(",") + (0 if '"ids":[]' in line else 1)
secs = float(sys.argv[3]) - float(sys.argv[2])
print(json.dumps({"tokens": n, "seconds": secs}))
PY
)
    rm -f "$out"
    theirs=$(RAYON_NUM_THREADS=1 python3 "$here/tokenizer_hf.py" hf "$tj" "$corpus")
    python3 - "$name" "$ours" "$theirs" <<'PY'
import json, sys
name, ours, theirs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
o = ours["tokens"] / ours["seconds"]
h = theirs["tokens"] / theirs["seconds"]
same = "same token count" if ours["tokens"] == theirs["tokens"] else "TOKEN COUNTS DIFFER"
print(f"{name}: ftmpi-tok {o/1e6:.2f} M tok/s ({ours['seconds']:.1f} s), "
      f"HF tokenizers 1 thread {h/1e6:.2f} M tok/s ({theirs['seconds']:.1f} s), "
      f"ratio {o/h:.2f}x; {ours['tokens']} tokens, {same}")
PY
done
