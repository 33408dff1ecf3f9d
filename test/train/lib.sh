# Shared helpers for the shell tests (sourced). The harness exports FT_BUILDDIR and
# FT_SRCDIR; tests run in a private scratch directory.
set -u
B="${FT_BUILDDIR:-$(pwd)}"
S="${FT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
# The real tokenizers (llama2, llama3, llama3.1, qwen3): their tokenizer.json is committed
# compressed, and make check lays their directories out in the build tree (test/data/Makefile.inc).
REAL_TOK="$B/test/data/tokenizers"
FTMPI="$B/ftmpi"
GENDATA="$B/ftmpi-gendata"
MPIRUN="${MPIRUN:-mpirun}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=1
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/ftmpi-test.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH" || exit 99

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
have_mpirun() { command -v "$MPIRUN" >/dev/null 2>&1; }

# run_ranks N ARGS...: ftmpi on N ranks (directly for N=1, so the singleton path is covered)
run_ranks() {
    n=$1; shift
    if [ "$n" -eq 1 ]; then "$FTMPI" "$@"; else "$MPIRUN" --oversubscribe -np "$n" "$FTMPI" "$@"; fi
}

# losses LOGFILE: the loss column of the step lines, one per line
losses() { sed -n 's/^step .*| loss \([0-9.eE+-]*\) .*/\1/p' "$1"; }

# same_losses A B TOL: every pair of losses agrees to a relative TOL
same_losses() {
    paste "$1" "$2" | awk -v tol="$3" '
        { d = $1 - $2; if (d < 0) d = -d; r = d / ($2 > 0 ? $2 : 1);
          if (r > tol) { printf "step %d: %s vs %s (rel %.2e)\n", NR, $1, $2, r; bad = 1 } }
        END { if (NR == 0) { print "no losses"; exit 1 } exit bad }'
}

# A small model config for tests; extra keys may be appended by the caller.
write_small_cfg() {
    cat > "$1" <<CFG
device = "cpu";
max_steps = 8;
seed = 7;
micro_batch_size = 2;
global_batch_size = 8;
activation_checkpointing = true;
grad_clip = 1.0;
log_every = 1;
model = {
  vocab_size = 259; hidden_size = 64; intermediate_size = 160; num_hidden_layers = 2;
  num_attention_heads = 4; num_key_value_heads = 2; max_position_embeddings = 64;
  rope_theta = 10000.0;
};
data = { train = "train.h5"; };
optimizer = { type = "adamw"; lr = 1e-2; weight_decay = 0.1; schedule = "cosine"; warmup_steps = 2; };
CFG
}

# start_ranks N ARGS...: like run_ranks, in the background, with $! the launcher's own
# pid (so signals sent to $! reach mpirun or ftmpi, not a wrapper shell).
start_ranks() {
    n=$1; shift
    if [ "$n" -eq 1 ]; then ( exec "$FTMPI" "$@" ) &
    else ( exec "$MPIRUN" --oversubscribe -np "$n" "$FTMPI" "$@" ) &
    fi
}

# metric FILE KIND KEY: KEY of the last KIND record of a metrics file (exact figures the
# log shows in human units: "memory" bytes, "peak_memory" backend_bytes, "step" comm_bytes)
metric() { sed -n "s/.*\"kind\":\"$2\".*\"$3\":\([0-9.eE+-]*\).*/\1/p" "$1" | tail -n 1; }
