#!/bin/sh
# One command: install dependencies, build, generate the bundled synthetic data, train
# the tiny Llama model on 2 MPI ranks on the CPU (loss falls within a minute), write a
# checkpoint, sample from it, and export it to the Hugging Face layout.
#   ./demo.sh            (extra KEY=VALUE arguments are passed to ftmpi)
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/install-deps.sh
scripts/build.sh
mkdir -p demo
# Single-digit sums: 100 facts, which the tiny model learns within the demo's 60 steps
# (multi-digit addition needs far longer, and its wrong samples looked like a broken
# trainer). Data made by an older demo (multi-digit) is replaced.
if [ ! -f demo/digits-1 ]; then
    rm -f demo/train.h5 demo/eval.h5
    build/ftmpi-gendata --rows 4096 --seq-len 128 --digits 1 demo/train.h5
    build/ftmpi-gendata --rows 256 --seq-len 128 --digits 1 --seed 2 demo/eval.h5
    touch demo/digits-1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
rm -rf demo/ck
mpirun --oversubscribe -np 2 build/ftmpi input/tiny.cfg checkpoint_dir=demo/ck \
    metrics_file=demo/metrics.jsonl "$@"
echo
echo "== greedy answers from demo/ck after 60 steps of single-digit addition =="
right=0
for prompt in "3+5=" "7+8=" "9+4=" "2+6=" "8+8=" "1+9=" "6+7=" "4+0=" "5+9=" "0+3="; do
    a=${prompt%%+*} b=${prompt#*+}; b=${b%=}
    got=$(build/ftmpi-generate demo/ck --byte-tokens --max-new-tokens 3 "$prompt" | head -n 1)
    if [ "$got" = "$((a + b))" ]; then mark=right; right=$((right + 1)); else mark="wrong, $((a + b))"; fi
    echo "$prompt$got   ($mark)"
done
echo "$right of 10 right (an untrained model gets about none)"
echo
echo "== export to Hugging Face layout =="
build/ftmpi-convert export --force "demo/ck/$(cat demo/ck/latest)" demo/hf
ls -l demo/hf
if command -v gnuplot >/dev/null 2>&1; then scripts/ftmpi-plot demo/metrics.jsonl demo/metrics.png; fi
