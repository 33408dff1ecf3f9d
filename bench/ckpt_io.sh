#!/bin/sh
# Checkpoint write and read bandwidth of ftmpi for 1, 2 and 4 ranks against dd with
# direct I/O moving the same number of bytes on the same disk, in the same run.
#   bench/ckpt_io.sh [DIR]   (DIR on the disk to measure; default /tmp)
# Model: ~380 M parameters, fp32, AdamW => /model + /optim/m + /optim/v = 12 bytes per
# parameter, 4.56 GB per checkpoint.
#
# Every ftmpi measurement is paired with a dd run right before it (this VM's disk
# drifts by ±20 % over minutes), each pair repeated REPEAT times (default 2); the
# table shows the median of each and the ratio of medians. The write includes creating
# the file, hashing, fsync and rename; the read starts from a dropped page cache and
# includes hash verification. Rows with direct_io=false are the collective parallel
# HDF5 path (MPI-IO through the page cache), for reference.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
base=${1:-/tmp}
repeat=${REPEAT:-2}
work=$(mktemp -d "$base/ftmpi-ckpt-bench.XXXXXX"); trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/ftmpi-gendata" --rows 16 --seq-len 24 train.h5 >/dev/null
cat > big.cfg <<CFG
max_steps = 1; micro_batch_size = 1; global_batch_size = 4; zero_stage = 3;
log_every = 1; comm_timeout = 0; progress = false;
model = { vocab_size = 32000; hidden_size = 1536; intermediate_size = 4096; num_hidden_layers = 11;
          num_attention_heads = 12; num_key_value_heads = 4; max_position_embeddings = 64; };
data = { train = "train.h5"; };
optimizer = { lr = 1e-4; };
CFG

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# dd_time write|read BYTES: seconds for dd to move BYTES (1 MiB blocks) with direct I/O
dd_time() {
    count=$(($2 / 1048576))
    if [ "$1" = write ]; then
        rm -f dd.bin; t0=$(now)
        dd if=/dev/zero of=dd.bin bs=1M count=$count oflag=direct conv=fsync 2>/dev/null
    else
        drop_caches; t0=$(now)
        dd if=dd.bin of=/dev/null bs=1M count=$count iflag=direct 2>/dev/null
    fi
    echo "$(now) - $t0" | bc
}

# ftmpi_time write|read N DIRECT_IO: seconds ftmpi reports for its checkpoint transfer
ftmpi_time() {
    n=$2
    if [ "$1" = write ]; then
        rm -rf ck
        mpirun --oversubscribe -np "$n" "$build/ftmpi" big.cfg checkpoint_dir=ck \
            direct_io="$3" global_batch_size="$((n > 4 ? n : 4))" > w.log 2>&1 || { cat w.log; exit 1; }
        sed -n 's/.*written in \([0-9.]*\)s.*/\1/p' w.log
    else
        drop_caches
        mpirun --oversubscribe -np "$n" "$build/ftmpi" big.cfg checkpoint_dir=ck resume=auto \
            max_steps=1 direct_io="$3" > r.log 2>&1 || true
        sed -n 's/.*(read in \([0-9.]*\)s.*/\1/p' r.log
    fi
}

printf "%-44s %6s %8s %7s %8s %7s %6s\n" what GB ftmpi_s GB/s dd_s dd_GB/s ratio
row() { # OP N DIRECT_IO
    : > f.t; : > d.t
    i=0
    while [ $i -lt "$repeat" ]; do
        if [ "$1" = write ]; then
            dd_time write "${bytes:-4561829888}" >> d.t
            ftmpi_time write "$2" "$3" >> f.t
            bytes=$(stat -c %s ck/step-*.h5)
        else
            dd_time read "$bytes" >> d.t
            ftmpi_time read "$2" "$3" >> f.t
        fi
        i=$((i + 1))
    done
    ft=$(median < f.t); dt=$(median < d.t)
    label="ftmpi $1, $2 rank(s)"
    [ "$3" = true ] || label="$label, direct_io=false"
    awk -v l="$label" -v b="$bytes" -v f="$ft" -v d="$dt" 'BEGIN {
        printf "%-44s %6.2f %8.2f %7.2f %8.2f %7.2f %6.2f\n", l, b/1e9, f, b/1e9/f, d, b/1e9/d, d/f }'
}
for n in 1 2 4; do
    row write $n true
    row read $n true
done
row write 2 false
row read 2 false
echo "ratio = ftmpi GB/s / dd GB/s (medians of $repeat paired runs); dd: 1 MiB blocks, oflag=direct conv=fsync / iflag=direct"
