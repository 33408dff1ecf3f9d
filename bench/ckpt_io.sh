#!/bin/sh
# Checkpoint write and read bandwidth of ftmpi (parallel HDF5, every rank writing its
# slices collectively) for 1, 2 and 4 ranks, against dd with direct I/O writing and
# reading the same number of bytes on the same disk, in the same run.
#   bench/ckpt_io.sh [DIR]   (DIR on the disk to measure; default a temp dir in /tmp)
# Model: ~300 M parameters, fp32, AdamW => /model + /optim/m + /optim/v = 12 bytes per
# parameter, about 3.6 GB per checkpoint.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
base=${1:-/tmp}
work=$(mktemp -d "$base/ftmpi-ckpt-bench.XXXXXX"); trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/ftmpi-gendata" --rows 16 --seq-len 32 train.h5 >/dev/null
cat > big.cfg <<CFG
max_steps = 1; micro_batch_size = 1; global_batch_size = 4; zero_stage = 3;
activation_checkpointing = true; log_every = 1; comm_timeout = 0;
model = { vocab_size = 32000; hidden_size = 1536; intermediate_size = 4096; num_hidden_layers = 11;
          num_attention_heads = 12; num_key_value_heads = 4; max_position_embeddings = 64; };
data = { train = "train.h5"; };
optimizer = { lr = 1e-4; };
CFG
printf "%-22s %10s %10s %8s\n" what GB seconds GB/s
for n in 1 2 4; do
    rm -rf ck
    mpirun --oversubscribe -np $n "$build/ftmpi" big.cfg checkpoint_dir=ck > w.log 2>&1
    f=$(ls ck/step-*.h5); bytes=$(stat -c %s "$f")
    ws=$(sed -n 's/.*written in \([0-9.]*\)s.*/\1/p' w.log)
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    mpirun --oversubscribe -np $n "$build/ftmpi" big.cfg checkpoint_dir=ck resume=auto max_steps=1 > r.log 2>&1 || true
    rs=$(sed -n 's/.*(read in \([0-9.]*\)s).*/\1/p' r.log)
    awk -v b=$bytes -v t=$ws -v n=$n 'BEGIN { printf "%-22s %10.2f %10.2f %8.2f\n", "ftmpi write, " n " rank(s)", b/1e9, t, b/1e9/t }'
    awk -v b=$bytes -v t=$rs -v n=$n 'BEGIN { printf "%-22s %10.2f %10.2f %8.2f\n", "ftmpi read,  " n " rank(s)", b/1e9, t, b/1e9/t }'
done
count=$((bytes / 1048576))
t0=$(date +%s.%N); dd if=/dev/zero of=dd.bin bs=1M count=$count oflag=direct conv=fsync 2>/dev/null; t1=$(date +%s.%N)
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
t2=$(date +%s.%N); dd if=dd.bin of=/dev/null bs=1M iflag=direct 2>/dev/null; t3=$(date +%s.%N)
awk -v b=$((count * 1048576)) -v t="$(echo "$t1 - $t0" | bc)" 'BEGIN { printf "%-22s %10.2f %10.2f %8.2f\n", "dd write (direct)", b/1e9, t, b/1e9/t }'
awk -v b=$((count * 1048576)) -v t="$(echo "$t3 - $t2" | bc)" 'BEGIN { printf "%-22s %10.2f %10.2f %8.2f\n", "dd read (direct)", b/1e9, t, b/1e9/t }'
echo "ratio = ftmpi GB/s / dd GB/s on the same disk; the ftmpi write includes fsync and rename"
