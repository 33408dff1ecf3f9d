#!/bin/sh
# ftmpi-prep tokens/s (1 and 2 ranks) vs HF `tokenizers` (python, batch encode, 1 and 2
# threads) on the same generated Alpaca-style corpus (>= 50 MiB by default, generated into /tmp, never
# committed). Prints one line per run and the ratios.
# Usage: bench/prep.sh [BUILD_DIR] [MB]   (BUILD_DIR: where ftmpi-prep is, and the real tokenizers
#                                          `make tokenizer-data` unpacks there; default .)
set -eu
B=${1:-.}
MB=${2:-55}
S=$(cd "$(dirname "$0")/.." && pwd)
TOK=$B/test/data/tokenizers/llama3/tokenizer.json
[ -f "$TOK" ] || { echo "bench/prep.sh: $TOK not found: run 'make tokenizer-data' in $B" >&2; exit 1; }
W=$(mktemp -d /tmp/ftmpi-bench-prep.XXXXXX)
trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

python3 - "$W/corpus.jsonl" "$MB" <<'PY'
import json, random, sys
random.seed(1)
words = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when if "
         "so no what up out who them some could more into time only new then about like than "
         "model data train token llama 2024 3.14 naïve café 日本語 données überall 🦙 — can't "
         "it's they'll HTTP/1.1 x86_64 foo_bar(42) {key: value} 1,234,567").split()
def text(n):
    s = []
    for _ in range(n):
        w = random.choice(words)
        s.append(w.capitalize() if random.random() < 0.1 else w)
        if random.random() < 0.08: s[-1] += random.choice([".", ",", "?", "!", ":\n", ".\n\n"])
    return " ".join(s)
target, out = int(sys.argv[2]) * 1000000, open(sys.argv[1], "w", encoding="utf-8")
size = 0
while size < target:
    r = {"instruction": text(random.randint(5, 30)),
         "input": text(random.randint(0, 80)) if random.random() < 0.4 else "",
         "output": text(random.randint(10, 300))}
    line = json.dumps(r, ensure_ascii=False) + "\n"
    out.write(line); size += len(line.encode())
PY
echo "corpus: $(du -m "$W/corpus.jsonl" | cut -f1) MB, $(wc -l < "$W/corpus.jsonl") records"

ft() { # RANKS
    if [ "$1" -eq 1 ]; then set -- "$B/ftmpi-prep"; else set -- mpirun --oversubscribe -np "$1" "$B/ftmpi-prep"; fi
    "$@" -t "$TOK" --seq-len 4096 -o "$W/out.h5" "$W/corpus.jsonl" |
        sed -n 's/.*: \([0-9]*\) tokens in \([0-9.]*\) s (\([0-9]*\) tokens\/s), total \([0-9.]*\) s/\1 \2 \3 \4/p'
}
hf() { RAYON_NUM_THREADS=$1 python3 "$S/bench/prep_hf.py" "$TOK" "$W/corpus.jsonl" |
    sed -n 's/tokens=\([0-9]*\) seconds=\([0-9.]*\) tokens_per_s=\([0-9]*\)/\1 \2 \3/p'; }

for n in 1 2; do
    set -- $(ft "$n"); ft_tok=$1 ft_s=$2 ft_rate=$3 ft_total=$4
    set -- $(hf "$n"); hf_tok=$1 hf_s=$2 hf_rate=$3
    echo "ftmpi-prep $n rank(s):  $ft_tok tokens, tokenize $ft_s s = $ft_rate tokens/s (whole run incl. packing+write: $ft_total s)"
    echo "HF tokenizers $n thread(s): $hf_tok tokens, $hf_s s = $hf_rate tokens/s"
    awk -v a="$ft_rate" -v b="$hf_rate" -v n="$n" 'BEGIN { printf "ratio ftmpi-prep/HF at %d: %.2fx\n", n, a / b }'
done
