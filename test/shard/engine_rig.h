/* What the engine tests that run on MPI ranks share (test_engine_frozen.c,
 * test_engine_finite.c; each is one translation unit, so these counters are its own): a
 * check that fails when it fails on any rank, a fatal error that ends every rank, and the
 * rig of backend and communicators the engine runs on, the CPU backend with MPI or, with
 * "cuda", the CUDA backend with NCCL (on a GPU or the CPU execution harness). */
#ifndef FT_TEST_SHARD_ENGINE_RIG_H
#define FT_TEST_SHARD_ENGINE_RIG_H

#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"

static int rank, nranks, failures, checks;

/* Every rank calls check() alike; a case fails when it fails on any rank (each rank
 * checks its own answer, so "the same on every rank" is checked too). */
static inline void check(int ok, const char *fmt, ...)
{
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    checks++;
    if (all)
        return;
    failures++;
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        printf("FAIL ");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
}

static inline void die(const char *what, const ft_error *err)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, err->msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

typedef struct rig {
    ft_backend *be;
    ft_comm *comm; /* the engine's: MPI on the CPU, NCCL on CUDA */
    ft_comm *mpi;
    bool cuda;
} rig;

/* 77 where CUDA was asked for and there is no CUDA backend or device. */
static inline int rig_setup(rig *r)
{
    ft_error err;
    if (ft_comm_mpi_create(&r->mpi, &err))
        die("ft_comm_mpi_create", &err);
    r->comm = r->mpi;
    if (!r->cuda) {
        if (ft_backend_cpu_create(&r->be, &err))
            die("ft_backend_cpu_create", &err);
        return 0;
    }
    if (ft_backend_cuda_create(&r->be, r->mpi->local_rank, &err)) {
        if (strstr(err.msg, "no usable CUDA device") || strstr(err.msg, "without CUDA"))
            return 77;
        die("ft_backend_cuda_create", &err);
    }
    if (ft_comm_nccl_create(&r->comm, r->be, &err))
        die("ft_comm_nccl_create", &err);
    return 0;
}

/* MPI and the rig for the backend argv[1] names ("cpu" or "cuda"); 77 (every rank,
 * MPI finalized) where it cannot be had, else 0. */
static inline int rig_start(int *argc, char ***argv, rig *r)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    memset(r, 0, sizeof *r);
    r->cuda = *argc > 1 && strcmp((*argv)[1], "cuda") == 0;
    int skip = rig_setup(r);
    MPI_Allreduce(MPI_IN_PLACE, &skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!skip)
        return 0;
    if (rank == 0)
        printf("SKIP: no CUDA backend or device\n");
    MPI_Finalize();
    return 77;
}

/* Releases the rig, prints "ok|FAIL: N checks, M failed (B backend, R ranks)" on rank 0
 * and finalizes MPI; the exit status. */
static inline int rig_finish(rig *r)
{
    if (r->comm != r->mpi)
        ft_comm_destroy(r->comm);
    ft_comm_destroy(r->mpi);
    ft_backend_destroy(r->be);
    if (rank == 0)
        printf("%s: %d checks, %d failed (%s backend, %d ranks)\n", failures ? "FAIL" : "ok",
               checks, failures, r->cuda ? "cuda" : "cpu", nranks);
    MPI_Finalize();
    return failures ? 1 : 0;
}

#endif
