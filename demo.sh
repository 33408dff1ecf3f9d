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
[ -f demo/train.h5 ] || build/ftmpi-gendata --rows 4096 --seq-len 128 demo/train.h5
[ -f demo/eval.h5 ] || build/ftmpi-gendata --rows 256 --seq-len 128 --seed 2 demo/eval.h5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
rm -rf demo/ck
mpirun --oversubscribe -np 2 build/ftmpi input/tiny.cfg checkpoint_dir=demo/ck \
    metrics_file=demo/metrics.jsonl "$@"
echo
echo "== samples from demo/ck (greedy; the model has seen 60 steps of addition) =="
for prompt in "12+35=" "401+99=" "7+8="; do
    printf '%s' "$prompt"
    build/ftmpi-generate demo/ck --byte-tokens --max-new-tokens 8 "$prompt"
done
echo
echo "== export to Hugging Face layout =="
build/ftmpi-convert export --force "demo/ck/$(cat demo/ck/latest)" demo/hf
ls -l demo/hf
if command -v gnuplot >/dev/null 2>&1; then scripts/ftmpi-plot demo/metrics.jsonl demo/metrics.png; fi
