/* pmix_fence_probe SLOW_RANK SECONDS: run by srun --mpi=pmix (test_slurm_fence.sh). Rank
 * SLOW_RANK sleeps SECONDS before a PMIx_Fence without data; every rank then prints
 * "rank R entered E left L", the CLOCK_MONOTONIC seconds at which it entered and left
 * the fence. A fence is a barrier: no rank may leave before the last has entered, on
 * whichever node it runs (the emulated nodes share one clock). Open MPI 4's MPI_Init
 * ends with exactly this fence and counts on it: a rank that leaves MPI_Init early sends
 * to peers still inside it, which have no receive handler yet. */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pmix_fence_probe SLOW_RANK SECONDS (under srun --mpi=pmix)\n");
        return 2;
    }
    const long slow = strtol(argv[1], NULL, 10);
    const unsigned seconds = (unsigned)strtoul(argv[2], NULL, 10);
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_fence_probe: PMIx_Init: %s (not started by srun --mpi=pmix?)\n",
                PMIx_Error_string(rc));
        return 1;
    }
    if ((long)me.rank == slow)
        sleep(seconds);
    const double entered = mono_now();
    rc = PMIx_Fence(NULL, 0, NULL, 0); /* all ranks of the job, no data: a plain barrier */
    const double left = mono_now();
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "pmix_fence_probe: rank %u: PMIx_Fence: %s\n", me.rank,
                PMIx_Error_string(rc));
        PMIx_Finalize(NULL, 0);
        return 1;
    }
    printf("rank %u entered %.3f left %.3f\n", me.rank, entered, left);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
