# Helpers of the SLURM tests (sourced after test/train/lib.sh). They start a private
# Slurm with .ci/slurm-setup.sh in a directory and port range of their own, so two
# tests may run at once, and stop it on exit. SKIP (77) unless FTMPI_SLURM_TESTS=1,
# when not root, or when Slurm cannot be installed or started.
SETUP="$S/.ci/slurm-setup.sh"
JOBS="$S/jobs"

# slurm_start MODE PORT: single|two, the first of 3 TCP ports
slurm_start() {
    [ "${FTMPI_SLURM_TESTS:-0}" = 1 ] ||
        skip "set FTMPI_SLURM_TESTS=1 to run (installs slurm-wlm/munge if missing and starts a private Slurm as root)"
    [ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs jobs as their user)"
    have_mpirun || skip "no $MPIRUN"
    [ -x "$FTMPI" ] && [ -x "$GENDATA" ] || fail "no $FTMPI or $GENDATA (build first)"
    FTMPI_SLURM_DIR=$(mktemp -d /tmp/ftmpi-slurm.XXXXXX) || fail "mktemp"
    FTMPI_SLURM_PORT=$2
    export FTMPI_SLURM_DIR FTMPI_SLURM_PORT
    trap 'slurm_stop; rm -rf "$SCRATCH"' EXIT
    # a crashing rank leaves a core for core_backtraces (Slurm passes this limit on)
    ulimit -c unlimited 2>/dev/null || ulimit -c "$(ulimit -H -c)" 2>/dev/null
    trap 'exit 1' INT TERM HUP
    bash "$SETUP" install > setup.log 2>&1 || { cat setup.log; skip "Slurm could not be installed"; }
    bash "$SETUP" start "$1" >> setup.log 2>&1 || { cat setup.log; skip "Slurm could not be started"; }
    . "$FTMPI_SLURM_DIR/env.sh"
    # what the job needs from this environment (sbatch exports it to the job)
    export FTMPI
}

slurm_stop() {
    [ -n "${FTMPI_SLURM_DIR:-}" ] || return 0
    bash "$SETUP" stop > /dev/null 2>&1
    rmdir "$FTMPI_SLURM_DIR" 2>/dev/null
    FTMPI_SLURM_DIR=
}

# job_field JOB NAME: a field of `scontrol show job` (JobState, Restarts, ExitCode, ...)
job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# wait_job_done JOB SECONDS: until the job has ended for good (not requeued)
wait_job_done() {
    i=0
    while [ $i -lt "$2" ]; do
        case $(job_field "$1" JobState) in
        COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;;
        esac
        sleep 1; i=$((i + 1))
    done
    return 1
}

# slurm_diag JOB LOG: what to look at when a job went wrong. The job's own log comes
# last: the CI's summary shows only the last 40 lines of a failed test's output.
slurm_diag() {
    for f in "$FTMPI_SLURM_DIR"/log/*.log; do echo "--- tail of $f"; tail -n 20 "$f"; done
    echo "--- job $1"; scontrol show job "$1" 2>&1
    core_backtraces
    echo "--- $2"; cat "$2" 2>&1
}

# core_backtraces: every thread's stack in each core file a crashed rank left in the
# job's directory (slurm_start allows them; where the kernel's core_pattern is a plain
# file name), before the scratch directory and the core go away.
core_backtraces() {
    for c in "$SCRATCH"/core*; do
        [ -f "$c" ] || continue
        echo "--- $c"
        if command -v gdb > /dev/null 2>&1; then
            gdb -batch -ex 'thread apply all bt 16' "$FTMPI" "$c" 2>&1 |
                grep -v -e '^\[New LWP' -e '^warning:' -e '^$'
        else
            echo "(no gdb to read it)"
        fi
    done
}
