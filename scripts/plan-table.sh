#!/bin/sh
# Prints doc/planning.md's table: memory per rank (GiB) from `ftmpi --plan` for the
# shipped decks on 8, 16 and 32 ranks at seq_len 4096 (2048 for the GPT-NeoX and GPT-J
# decks, their context length), activation checkpointing on,
# stages 2, 3 and 3 + offload. Extra arguments are config overrides applied to every
# deck (e.g. precision=bf16 grad_reduce_dtype=bf16).
#   scripts/plan-table.sh [FTMPI=build/ftmpi] [key=value ...]
#   scripts/plan-table.sh --lora [key=value ...]
# --lora prints the LoRA table instead: rank 16, alpha 32 on all seven projections (the
# deck input/llama2-70b-lora.cfg, and input/llama3-8b.cfg with lora.rank=16
# lora.alpha=32), seq_len 4096, checkpointing on, no offload, per rank: the frozen
# base's working parameters, its gather pool and load staging, the adapters' engine,
# the activations, the device total.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
ftmpi=${FTMPI:-$top/build/ftmpi}
[ -x "$ftmpi" ] || { echo "plan-table: $ftmpi not found (set FTMPI)" >&2; exit 2; }
budget=80
if [ "${1:-}" = --lora ]; then
    shift
    echo "| model | ranks | stage | base | base gathered | adapters | activations | device total |"
    echo "|---|---|---|---|---|---|---|---|"
    for row in "Llama 3 8B:llama3-8b:1:0" "Llama 3 8B:llama3-8b:8:3" \
               "Llama 2 70B:llama2-70b-lora:8:3" "Llama 2 70B:llama2-70b-lora:16:3"; do
        name=${row%%:*} rest=${row#*:}
        file=${rest%%:*} rest=${rest#*:}
        n=${rest%%:*} stage=${rest#*:}
        "$ftmpi" --plan "$top/input/$file.cfg" -np "$n" --seq-len 4096 lora.rank=16 lora.alpha=32 \
                 activation_checkpointing=true offload_optimizer=false "$@" |
            awk -v name="$name" -v n="$n" -v st="$stage" -v b="$budget" '
                /^LoRA rank/ { lora = 1 }
                # rows: [*] stage offload ckpt | base gathered adapters acts | device host | fits
                { line = $0; sub(/^\*/, " ", line); split(line, f, "|"); split(f[1], k, " ");
                  split(f[2], m, " "); split(f[3], d, " ") }
                k[1] == st && k[2] == "no" && k[3] == "on" {
                    total = d[1] <= b ? sprintf("**%.1f**", d[1]) : sprintf("%.1f", d[1])
                    row = sprintf("| %s | %d | %d | %.1f | %.1f | %.2f | %.1f | %s |", name, n,
                                  st, m[1], m[2], m[3], m[4], total) }
                END { if (!lora || row == "") { print "plan-table: no LoRA row" > "/dev/stderr"; exit 1 }
                      print row }'
    done
    exit 0
fi
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
