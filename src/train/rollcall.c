#include "train/rollcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROLLCALL_TAG = 8787 };

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ft_rollcall(MPI_Comm comm, double grace, char *missing, size_t len)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    missing[0] = '\0';
    MPI_Request *req = calloc((size_t)size * 2, sizeof *req);
    int *got = calloc((size_t)size, sizeof *got), here = rank;
    int *in = calloc((size_t)size, sizeof *in);
    if (!req || !got || !in) {
        free(req), free(got), free(in);
        return 0;
    }
    for (int p = 0; p < size; p++) {
        req[2 * p] = req[2 * p + 1] = MPI_REQUEST_NULL;
        if (p == rank)
            continue;
        MPI_Irecv(&in[p], 1, MPI_INT, p, ROLLCALL_TAG, comm, &req[2 * p]);
        MPI_Isend(&here, 1, MPI_INT, p, ROLLCALL_TAG, comm, &req[2 * p + 1]);
    }
    /* poll (the ranks fire at slightly different moments) until all answered or the
     * grace period is over; sends are tested too, so that ours leave before we exit */
    const double end = mono_now() + grace;
    int answered = 0;
    while (answered < size - 1 && mono_now() < end) {
        answered = 0;
        for (int p = 0; p < size; p++) {
            if (p == rank)
                continue;
            int flag = got[p];
            if (!flag)
                MPI_Test(&req[2 * p], &flag, MPI_STATUS_IGNORE);
            got[p] = flag;
            answered += flag;
            MPI_Test(&req[2 * p + 1], &flag, MPI_STATUS_IGNORE);
        }
        struct timespec nap = { 0, 10 * 1000 * 1000 };
        nanosleep(&nap, NULL);
    }
    int n = 0;
    size_t used = 0;
    for (int p = 0; p < size; p++)
        if (p != rank && !got[p]) {
            int w = snprintf(missing + used, len - used, "%s%d", n ? ", " : "", p);
            if (w > 0 && used + (size_t)w < len)
                used += (size_t)w;
            n++;
        }
    /* req and in stay allocated: a late answer may still land in them, and the caller
     * ends the process right after the report */
    free(got);
    return n;
}
