#!/bin/sh
# Prints doc/planning.md's table: memory per rank (GiB) from `ftmpi --plan` for the
# shipped decks on 8, 16 and 32 ranks at seq_len 4096 (2048 for the GPT-NeoX and GPT-J
# decks, their context length), activation checkpointing on,
# stages 2, 3 and 3 + offload. Extra arguments are config overrides applied to every
# deck (e.g. precision=bf16 grad_reduce_dtype=bf16).
#   scripts/plan-table.sh [FTMPI=build/ftmpi] [key=value ...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
ftmpi=${FTMPI:-$top/build/ftmpi}
[ -x "$ftmpi" ] || { echo "plan-table: $ftmpi not found (set FTMPI)" >&2; exit 2; }
budget=80
echo "| model | ranks | stage 2 | stage 3 | stage 3 + offload (device / host) |"
echo "|---|---|---|---|---|"
for deck in "Llama 2 7B:llama2-7b" "Llama 3 8B:llama3-8b" "Qwen2.5 7B:qwen2.5-7b" \
            "Qwen3 8B:qwen3-8b" "Mistral 7B v0.3:mistral-7b-v0.3" \
            "Pythia 6.9B (seq 2048):pythia-6.9b:2048" "GPT-J 6B (seq 2048):gpt-j-6b:2048" \
            "Llama 2 13B:llama2-13b" \
            "Llama 2 70B:llama2-70b" "Llama 3 70B:llama3-70b"; do
    name=${deck%%:*} file=${deck#*:} seq=4096
    case $file in *:*) seq=${file#*:} file=${file%%:*} ;; esac
    for n in 8 16 32; do
        "$ftmpi" --plan "$top/input/$file.cfg" -np "$n" --seq-len "$seq" "$@" |
            awk -v name="$name" -v n="$n" -v b="$budget" '
                function cell(v) { return v <= b ? sprintf("**%.1f**", v) : sprintf("%.1f", v) }
                # rows: [*] stage offload ckpt | params grads optimizer gathered acts | device host | fits
                { line = $0; sub(/^\*/, " ", line); split(line, f, "|"); split(f[1], k, " ");
                  split(f[3], d, " ") }
                k[3] == "on" && k[1] == 2 && k[2] == "no" { s2 = d[1] }
                k[3] == "on" && k[1] == 3 && k[2] == "no" { s3 = d[1] }
                k[3] == "on" && k[1] == 3 && k[2] == "yes" { s3o = d[1]; s3h = d[2] }
                END { printf "| %s | %d | %s | %s | %s / %.1f |\n", name, n, cell(s2), cell(s3),
                             cell(s3o), s3h }'
    done
done
