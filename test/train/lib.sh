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
# cuda_named: FT_CUDA_ONLY, where set, names this test (CI's sanitizer stage names a few:
# there the harness runs 3x slower, and the main stage ran every case).
cuda_named() { [ -z "${FT_CUDA_ONLY:-}" ] || echo " $FT_CUDA_ONLY " | grep -q " $(basename "$0" .sh) "; }
# cuda_cases: whether this test's device = "cuda" cases run: the build has the CUDA backend
# (a GPU or the CPU execution harness), and cuda_named.
cuda_cases() {
    "$FTMPI" --version 2>/dev/null | grep -q "backends:.*cuda" || return 1
    cuda_named && return 0
    echo "device = cuda cases left out: not in FT_CUDA_ONLY ($FT_CUDA_ONLY)"
    return 1
}

# backends_for CFG: "cpu", and "cuda" after it where this test's device = "cuda" cases run
# (cuda_cases) and a one-step run of CFG on it works (a GPU or the CPU execution harness)
backends_for() {
    if cuda_cases >&2 &&
        "$FTMPI" "$1" device=cuda max_steps=1 optimizer.warmup_steps=0 > probe.log 2>&1; then
        echo "cpu cuda"
    else
        echo cpu
    fi
}

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

# step_numbers JSONL: every step's loss and gradient norm and every evaluation's loss,
# exactly as the metrics file has them, one record a line
step_numbers() {
    sed -n -e 's/.*"kind":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*"grad_norm":\([^,]*\),.*/step \1 \2 \3/p' \
           -e 's/.*"kind":"eval","step":\([0-9]*\),"loss":\([^,]*\),.*/eval \1 \2/p' "$1"
}

# same_bits TAG STEPS A B: runs A and B (metrics in A.jsonl, weights in A.h5) wrote STEPS
# step records with bitwise the same losses and gradient norms, and the same /model
same_bits() {
    step_numbers "$3.jsonl" > "$3.txt"
    step_numbers "$4.jsonl" > "$4.txt"
    [ "$(grep -c '^step' "$3.txt")" -eq "$2" ] || { cat "$3.jsonl"; fail "$1: expected $2 step records"; }
    cmp -s "$3.txt" "$4.txt" || { paste "$3.txt" "$4.txt"; fail "$1: losses or norms differ"; }
    h5diff "$3.h5" "$4.h5" /model /model > d.log 2>&1 || { head -20 d.log; fail "$1: final weights differ"; }
}

# same_with_and_without VAR N TAG STEPS EVALS "CHECKPOINTS" CFG ARGS...: trains CFG with
# ARGS on N ranks with VAR=1 and with VAR=0 (TAG.V.log, metrics TAG.V.jsonl, checkpoints
# in ck-TAG.V, final weights TAG.V.h5) and fails unless the two are bitwise the same:
# every step's loss and gradient norm and every evaluation (STEPS and EVALS records
# expected), /model and /optim of each checkpoint file named in CHECKPOINTS, and the final
# weights. For the switches that only reorder work (overlaps), which must change no bit.
same_with_and_without() {
    var=$1 n=$2 tag=$3 nsteps=$4 nevals=$5 ckpts=$6; shift 6
    for v in 1 0; do
        rm -rf "ck-$tag.$v"
        export "$var=$v"
        run_ranks "$n" "$@" metrics_file="$tag.$v.jsonl" checkpoint_dir="ck-$tag.$v" \
            final_weights="$tag.$v.h5" > "$tag.$v.log" 2>&1 ||
            { cat "$tag.$v.log"; fail "$tag: run with $var=$v"; }
    done
    unset "$var"
    step_numbers "$tag.1.jsonl" > "$tag.1.numbers"; step_numbers "$tag.0.jsonl" > "$tag.0.numbers"
    [ "$(grep -c '^step' "$tag.1.numbers")" -eq "$nsteps" ] &&
        [ "$(grep -c '^eval' "$tag.1.numbers")" -eq "$nevals" ] ||
        { cat "$tag.1.numbers"; fail "$tag: expected $nsteps steps and $nevals evaluations in the metrics"; }
    cmp -s "$tag.1.numbers" "$tag.0.numbers" ||
        { paste "$tag.1.numbers" "$tag.0.numbers"; fail "$tag: losses, gradient norms or evaluations differ with $var=0"; }
    for f in $ckpts; do
        for g in /model /optim; do
            h5diff "ck-$tag.1/$f" "ck-$tag.0/$f" $g $g > "$tag.diff" 2>&1 ||
                { head "$tag.diff"; fail "$tag: checkpoint $f differs in $g with $var=0"; }
        done
    done
    h5diff "$tag.1.h5" "$tag.0.h5" /model /model > "$tag.diff" 2>&1 ||
        { head "$tag.diff"; fail "$tag: final weights differ with $var=0"; }
    echo "$tag: bitwise the same with $var=1 and $var=0"
}

# beside_or_not TAG WHAT: the start-up line "beside compute" of TAG.1.log (the switch on)
# names WHAT, that of TAG.0.log (off) does not: the runs compared did differ in it
beside_or_not() {
    grep "^ftmpi: beside compute:" "$1.1.log" | grep -qF "$2" ||
        { grep "beside compute" "$1.1.log"; fail "$1: '$2' not beside compute with the switch on"; }
    grep "^ftmpi: beside compute:" "$1.0.log" | grep -qF "$2" &&
        { grep "beside compute" "$1.0.log"; fail "$1: '$2' still beside compute with the switch off"; }
    return 0
}
