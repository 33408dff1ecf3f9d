#!/bin/sh
# One command: install dependencies, build, generate the bundled synthetic data and
# train the tiny Llama model on 2 MPI ranks on the CPU (loss falls within a minute).
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
exec mpirun --oversubscribe -np 2 build/ftmpi input/tiny.cfg "$@"
