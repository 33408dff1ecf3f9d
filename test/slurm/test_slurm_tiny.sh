#!/bin/sh
# jobs/tiny.slurm under a real (private, single-node) Slurm: pre-emption and requeue.
# The job (2 ranks, srun --mpi=pmix) gets SIGUSR1 mid-run from `scancel --signal=USR1`,
# as from --signal=USR1@180 near its time limit: every rank finishes its step, ftmpi
# checkpoints and exits 85, the script requeues the job, Slurm restarts it
# (SLURM_RESTART_COUNT=1), it resumes from the checkpoint and completes. Its loss at
# every step, across both runs, equals that of an uninterrupted 2-rank mpirun run.
# The private Slurm sets AuthInfo=cred_expire=10, so the requeued job may start again
# 11 s after the requeue (Slurm's default is 121 s). SKIP unless FTMPI_SLURM_TESTS=1.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/slurm/lib.sh"
slurm_start single "${FTMPI_SLURM_PORT_TINY:-16810}"

"$GENDATA" --rows 1024 --seq-len 64 train.h5 > /dev/null || fail "gendata"
"$GENDATA" --rows 64 --seq-len 64 --seed 2 eval.h5 > /dev/null || fail "gendata"
steps=30
set -- "$S/input/tiny.cfg" data.train="$SCRATCH/train.h5" data.eval="$SCRATCH/eval.h5" \
    max_steps=$steps save_every=5 log_every=1 eval_every=0

# the reference: the same run directly, uninterrupted
run_ranks 2 "$@" > ref.log 2>&1 || { cat ref.log; fail "reference run"; }

start=$(date +%s)
job=$(sbatch --parsable "$JOBS/tiny.slurm" "$@") || fail "sbatch"
log=ftmpi-tiny-$job.out
# signal it once it has logged step 2 (28 steps before it would finish)
i=0
until grep -q '^step *2/' "$log" 2>/dev/null; do
    [ $i -lt 1200 ] || { slurm_diag "$job" "$log"; fail "job $job did not reach step 2 in 120 s"; }
    sleep 0.1; i=$((i + 1))
done
scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 $job"
wait_job_done "$job" 300 || { slurm_diag "$job" "$log"; fail "job $job did not finish within 300 s"; }
took=$(($(date +%s) - start))

state=$(job_field "$job" JobState)
[ "$state" = COMPLETED ] && [ "$(job_field "$job" ExitCode)" = 0:0 ] ||
    { slurm_diag "$job" "$log"; fail "job $job ended $state, exit $(job_field "$job" ExitCode)"; }
[ "$(job_field "$job" Restarts)" = 1 ] || { slurm_diag "$job" "$log"; fail "Restarts=$(job_field "$job" Restarts), expected 1"; }
grep -q 'stop signal: checkpointed after step' "$log" || { cat "$log"; fail "no checkpoint on the signal"; }
stopped=$(sed -n 's/.*stop signal: checkpointed after step \([0-9]*\);.*/\1/p' "$log")
grep -q "exiting with 85" "$log" && grep -q 'checkpointed on a signal (exit 85): requeueing' "$log" ||
    { cat "$log"; fail "no exit 85 and requeue"; }
grep -q '^ftmpi-job: job .* SLURM_RESTART_COUNT=0 ' "$log" && grep -q '^ftmpi-job: job .* SLURM_RESTART_COUNT=1 ' "$log" ||
    { cat "$log"; fail "the log does not show the first run and the restart (SLURM_RESTART_COUNT=0, 1)"; }
grep -Eq "resumed from .*/checkpoints/ftmpi-tiny-$job/step-0*$stopped\.h5 at step $stopped( |\$)" "$log" ||
    { cat "$log"; fail "the restart did not resume from the signal checkpoint (step $stopped)"; }
[ "$stopped" -lt "$steps" ] || fail "stopped at step $stopped of $steps: the signal came too late"
[ "$(cat "checkpoints/ftmpi-tiny-$job/latest")" = "$(printf 'step-%06d.h5' $steps)" ] ||
    fail "the last checkpoint is not at step $steps"

# every step once, in order, with the reference's losses (bitwise: same rank count)
sed -n 's|^step *\([0-9]*\)/.*|\1|p' "$log" | tr '\n' ' ' > got.steps
seq 1 $steps | tr '\n' ' ' > want.steps
cmp -s got.steps want.steps || { cat "$log"; fail "steps logged: $(cat got.steps)"; }
losses ref.log > ref.loss
losses "$log" > job.loss
cmp -s ref.loss job.loss || { paste ref.loss job.loss; fail "losses differ from the uninterrupted run"; }
echo "job $job: SIGUSR1 after step $stopped, exit 85, requeued, resumed, completed in ${took} s;" \
    "final loss $(tail -n 1 job.loss) = uninterrupted run"
