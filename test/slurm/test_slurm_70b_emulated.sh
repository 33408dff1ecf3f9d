#!/bin/sh
# jobs/llama70b.slurm itself, unchanged, on an emulated cluster of 2 nodes x 8 fake GPUs
# (two slurmd on this box, .ci/slurm-setup.sh start two), with the CPU backend and the
# tiny model passed as arguments: 16 ranks through srun --mpi=pmix, 8 on each "node".
# Checks that Slurm placed ranks 0-7 on fn1 and 8-15 on fn2 with node-local ids 0-7 and
# all 8 GPUs visible, that ftmpi's own node-local ranks (MPI_Comm_split_type, which it
# uses to pick a GPU) are 0-7 of 8 on each node, and that the losses equal a 1-rank run
# with the same global batch (relative 2e-5). SKIP unless FTMPI_SLURM_TESTS=1.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/slurm/lib.sh"
slurm_start two "${FTMPI_SLURM_PORT_70B:-16820}"

"$GENDATA" --rows 256 --seq-len 64 train.h5 > /dev/null || fail "gendata"
steps=3
set -- "$S/input/tiny.cfg" device=cpu data.train="$SCRATCH/train.h5" data.eval="$SCRATCH/train.h5" \
    max_steps=$steps optimizer.warmup_steps=1 global_batch_size=16 micro_batch_size=1 \
    log_every=1 eval_every=0

# The fake nodes share one kernel: Open MPI must not use shared memory between them.
# Yielding when idle keeps 16 polling ranks usable on a small machine.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
    OMPI_MCA_mpi_yield_when_idle=1 FTMPI_SHOW_TASKS=1
start=$(date +%s)
# --cpus-per-task=1 overrides the script's 8 cores per rank (this box has few)
job=$(sbatch --parsable --cpus-per-task=1 --time=15 "$JOBS/llama70b.slurm" "$@" log_ranks=true) || fail "sbatch"
log=ftmpi-70b-$job.out
# the reference meanwhile: 1 rank, 16 micro-batches per step
run_ranks 1 "$@" > ref.log 2>&1 || { cat ref.log; fail "1-rank reference run"; }
wait_job_done "$job" 330 || { slurm_diag "$job" "$log"; fail "job $job did not finish within 330 s"; }
took=$(($(date +%s) - start))
state=$(job_field "$job" JobState)
[ "$state" = COMPLETED ] || { slurm_diag "$job" "$log"; fail "job $job ended $state, exit $(job_field "$job" ExitCode)"; }

grep -q '^ftmpi-job: job .* SLURM_RESTART_COUNT=0 nodes=2 (fn\[1-2\]) ranks=16 ' "$log" ||
    { cat "$log"; fail "header: not 16 ranks on fn[1-2]"; }
grep -q '^ftmpi-job: srun --mpi=pmix ' "$log" || { cat "$log"; fail "not launched with srun --mpi=pmix"; }
# Slurm's placement (FTMPI_SHOW_TASKS=1): rank R on fn(R/8+1), local id R%8, GPUs 0-7
r=0
while [ $r -lt 16 ]; do
    n=$((r / 8 + 1)); l=$((r % 8))
    grep -q "^ftmpi-task: node fn$n nodeid $((n - 1)) rank $r localid $l gpus 0,1,2,3,4,5,6,7\$" "$log" ||
        { cat "$log"; fail "task $r: expected node fn$n, local id $l, GPUs 0-7"; }
    # ftmpi's node-local rank (log_ranks = true)
    grep -q "^ftmpi: rank $r of 16 on .*, node-local rank $l of 8, device cpu" "$log" ||
        { cat "$log"; fail "ftmpi rank $r: expected node-local rank $l of 8"; }
    r=$((r + 1))
done
grep -q "^ftmpi: 16 ranks, backend cpu" "$log" || { cat "$log"; fail "not 16 ranks on the CPU backend"; }

losses ref.log > ref.loss
losses "$log" > job.loss
[ "$(wc -l < job.loss)" -eq $steps ] || { cat "$log"; fail "expected $steps steps in the job log"; }
same_losses job.loss ref.loss 2e-5 || { paste job.loss ref.loss; fail "16 ranks on 2 emulated nodes differ from 1 rank"; }
echo "job $job: 16 ranks on fn1+fn2 (node-local 0-7 each), losses = 1 rank to 2e-5, ${took} s"
