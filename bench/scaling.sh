#!/bin/sh
# Scaling of the sharding engine on this machine: step time, bytes sent per rank per
# step and time blocked in communication waits, for N = 1, 2, 4 ranks and ZeRO stages
# 0-3, on a small model (CPU backend, 1 thread per rank). "exposed comm" is the share
# of the step spent blocked in waits: what overlap did not hide.
#   bench/scaling.sh [STEPS]        (needs build/ftmpi)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FTMPI_BUILD:-$top/build}
steps=${1:-6}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$build/ftmpi-gendata" --rows 256 --seq-len 128 train.h5 >/dev/null
cat > s.cfg <<CFG
max_steps = $steps; micro_batch_size = 2; global_batch_size = 8; log_every = 1;
activation_checkpointing = true;
model = { vocab_size = 259; hidden_size = 256; intermediate_size = 688; num_hidden_layers = 4;
          num_attention_heads = 8; num_key_value_heads = 2; max_position_embeddings = 128; };
data = { train = "train.h5"; };
optimizer = { lr = 1e-3; };
CFG
printf "%-6s %-5s %10s %14s %12s %12s\n" ranks stage step_ms MB_sent/rank wait_ms exposed_comm
for n in 1 2 4; do
    for stage in 0 1 2 3; do
        rm -f m.jsonl
        mpirun --oversubscribe -np $n "$build/ftmpi" s.cfg zero_stage=$stage metrics_file=m.jsonl > run.log 2>&1
        # medians over steps 3.. (skip warm-up); exact bytes from the metrics file
        sed -n 's/.*"kind":"step".*"step_s":\([0-9.e+-]*\),.*"comm_wait_s":\([0-9.e+-]*\),.*"comm_bytes":\([0-9]*\),.*/\1 \2 \3/p' m.jsonl |
            tail -n +3 | sort -n | awk -v n=$n -v s=$stage '{ t[NR] = $1; w[NR] = $2; b[NR] = $3 }
            END { m = int((NR + 1) / 2);
                  printf "%-6d %-5d %10.1f %14.2f %12.1f %11.0f%%\n", n, s, 1000 * t[m], b[m] / 1e6, 1000 * w[m], 100 * w[m] / t[m] }'
    done
done
echo "machine: $(nproc --all) cores; ranks beyond the core count are oversubscribed"
