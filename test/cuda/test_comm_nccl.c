/* The NCCL communicator (cuda/comm_nccl.c) against the MPI one (src/comm/comm_mpi.c), op by
 * op of the ft_comm interface, on the ranks it is started with (test_comm_nccl.sh: 1, 2, 3):
 * all-reduce and reduce-scatter in fp32 (integer-valued data: exact in any order) and bf16
 * (NCCL's and MPI's bf16 sums both round each partial, to 1e-2 of each other), all-gather,
 * broadcast from every root, the host scalar reductions, the barrier, and the bytes each
 * accounts (the same ring formulas). Device buffers on the CUDA backend for NCCL, host
 * buffers for MPI. Exit 77 without a device. */
#include "backend/backend.h"
#include "util/bf16.h"
#include "comm/comm.h"

#include <cuda_runtime.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks, rank;

static void check(int ok, const char *what)
{
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    checks++;
    failures += !all;
    if (rank == 0)
        printf("%s %s\n", all ? "ok  " : "FAIL", what);
}

static int wait_ok(ft_comm *c, ft_comm_request *req)
{
    ft_error err;
    ft_error_clear(&err);
    int ok = c->ops->wait(c, req, &err) == 0;
    if (!ok)
        fprintf(stderr, "wait: %s\n", err.msg);
    return ok;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        if (rank == 0)
            printf("SKIP: no CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    ft_error err;
    ft_error_clear(&err);
    ft_backend *be = NULL;
    ft_comm *mpi = NULL, *nccl = NULL;
    if (ft_comm_mpi_create(&mpi, &err) || ft_backend_cuda_create(&be, mpi->local_rank % count, &err) ||
        ft_comm_nccl_create(&nccl, be, &err)) {
        fprintf(stderr, "rank %d: set-up: %s\n", rank, err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(nccl->rank == rank && nccl->size == size && strcmp(nccl->name, "nccl") == 0,
          "NCCL communicator: rank, size, name");

    const size_t per = 1000, n = per * (size_t)size;
    float *h = malloc(n * 4), *hm = malloc(n * 4), *g = malloc(n * 4);
    uint16_t *hb = malloc(n * 2), *hbm = malloc(n * 2), *gb = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)((int)(i % 97) - 48 + rank * 3); /* integers: exact sums */
        hb[i] = ft_f32_to_bf16(0.01f * (float)(i % 89) + 0.37f * (float)rank);
    }
    float *d = be->ops->alloc(be, n * 4), *dout = be->ops->alloc(be, per * 4);
    uint16_t *db = be->ops->alloc(be, n * 2), *dbout = be->ops->alloc(be, per * 2);
    ft_comm_request *rq;

    /* all-reduce fp32, in place */
    memcpy(hm, h, n * 4);
    be->ops->upload(be, d, h, n * 4);
    int ok = nccl->ops->all_reduce_f32(nccl, d, n, &rq) == 0 && wait_ok(nccl, rq);
    ok = ok && mpi->ops->all_reduce_f32(mpi, hm, n, &rq) == 0 && wait_ok(mpi, rq);
    be->ops->download(be, g, d, n * 4);
    check(ok && memcmp(g, hm, n * 4) == 0, "all_reduce_f32 equals MPI's (exact)");

    /* reduce-scatter fp32 */
    be->ops->upload(be, d, h, n * 4);
    ok = nccl->ops->reduce_scatter_f32(nccl, dout, d, per, &rq) == 0 && wait_ok(nccl, rq);
    float *hm_out = malloc(per * 4);
    ok = ok && mpi->ops->reduce_scatter_f32(mpi, hm_out, h, per, &rq) == 0 && wait_ok(mpi, rq);
    be->ops->download(be, g, dout, per * 4);
    check(ok && memcmp(g, hm_out, per * 4) == 0, "reduce_scatter_f32 equals MPI's (exact)");

    /* reduce-scatter fp32 in place (out = in + rank * per: ZeRO-1's gradients), on both
     * communicators: the slice lands at the rank's own place (MPI goes through a buffer of
     * its own there, since it forbids aliasing) */
    const size_t own = (size_t)rank * per;
    be->ops->upload(be, d, h, n * 4);
    memcpy(hm, h, n * 4);
    ok = nccl->ops->reduce_scatter_f32(nccl, d + own, d, per, &rq) == 0 && wait_ok(nccl, rq);
    ok = ok && mpi->ops->reduce_scatter_f32(mpi, hm + own, hm, per, &rq) == 0 && wait_ok(mpi, rq);
    be->ops->download(be, g, d + own, per * 4);
    check(ok && memcmp(g, hm_out, per * 4) == 0 && memcmp(hm + own, hm_out, per * 4) == 0,
          "reduce_scatter_f32 in place equals the out-of-place result (NCCL and MPI, exact)");

    /* bf16 all-reduce and reduce-scatter */
    memcpy(hbm, hb, n * 2);
    be->ops->upload(be, db, hb, n * 2);
    ok = nccl->ops->all_reduce_bf16(nccl, db, n, &rq) == 0 && wait_ok(nccl, rq);
    ok = ok && mpi->ops->all_reduce_bf16(mpi, hbm, n, &rq) == 0 && wait_ok(mpi, rq);
    be->ops->download(be, gb, db, n * 2);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double a = ft_bf16_to_f32(gb[i]), b = ft_bf16_to_f32(hbm[i]);
        double r = fabs(a - b) / (fabs(b) + 1e-3);
        worst = r > worst ? r : worst;
    }
    check(ok && worst <= 1e-2, "all_reduce_bf16 within 1e-2 of MPI's");
    uint16_t *hbm_out = malloc(per * 2);
    be->ops->upload(be, db, hb, n * 2);
    ok = nccl->ops->reduce_scatter_bf16(nccl, dbout, db, per, &rq) == 0 && wait_ok(nccl, rq);
    ok = ok && mpi->ops->reduce_scatter_bf16(mpi, hbm_out, hb, per, &rq) == 0 && wait_ok(mpi, rq);
    be->ops->download(be, gb, dbout, per * 2);
    worst = 0;
    for (size_t i = 0; i < per; i++) {
        double a = ft_bf16_to_f32(gb[i]), b = ft_bf16_to_f32(hbm_out[i]);
        double r = fabs(a - b) / (fabs(b) + 1e-3);
        worst = r > worst ? r : worst;
    }
    check(ok && worst <= 1e-2, "reduce_scatter_bf16 within 1e-2 of MPI's");

    /* all-gather of each rank's slice */
    be->ops->upload(be, dout, h + (size_t)rank * per, per * 4);
    ok = nccl->ops->all_gather(nccl, d, dout, per * 4, &rq) == 0 && wait_ok(nccl, rq);
    ok = ok && mpi->ops->all_gather(mpi, hm, h + (size_t)rank * per, per * 4, &rq) == 0 &&
         wait_ok(mpi, rq);
    be->ops->download(be, g, d, n * 4);
    check(ok && memcmp(g, hm, n * 4) == 0, "all_gather equals MPI's");

    /* broadcast from every root */
    ok = 1;
    for (int root = 0; root < size; root++) {
        for (size_t i = 0; i < per; i++)
            hm[i] = (float)(rank * 1000 + (int)i);
        be->ops->upload(be, dout, hm, per * 4);
        ok = ok && nccl->ops->broadcast(nccl, dout, per * 4, root, &rq) == 0 && wait_ok(nccl, rq);
        be->ops->download(be, g, dout, per * 4);
        for (size_t i = 0; i < per; i++)
            ok = ok && g[i] == (float)(root * 1000 + (int)i);
    }
    check(ok, "broadcast from every root");

    /* host scalars */
    double f[2] = {rank + 0.5, -(double)rank};
    int64_t iv[2] = {rank, 1};
    double mx[1] = {(double)(rank * 7 % 5)};
    ok = nccl->ops->all_reduce_f64_sum(nccl, f, 2, &err) == 0 &&
         nccl->ops->all_reduce_i64_sum(nccl, iv, 2, &err) == 0 &&
         nccl->ops->all_reduce_f64_max(nccl, mx, 1, &err) == 0 && nccl->ops->barrier(nccl, &err) == 0;
    double want_max = 0;
    for (int r = 0; r < size; r++)
        want_max = r * 7 % 5 > want_max ? r * 7 % 5 : want_max;
    check(ok && f[0] == size * (size - 1) / 2.0 + 0.5 * size && iv[0] == size * (size - 1) / 2 &&
              iv[1] == size && mx[0] == want_max,
          "f64 sum, i64 sum, f64 max, barrier");
    /* the same collectives as MPI's, plus one broadcast sent from this rank as root */
    check(nccl->stats.bytes_sent == mpi->stats.bytes_sent + per * 4,
          "bytes accounted: MPI's ring formulas, plus the broadcast this rank sent");

    be->ops->free(be, d), be->ops->free(be, dout), be->ops->free(be, db), be->ops->free(be, dbout);
    free(h), free(hm), free(g), free(hb), free(hbm), free(gb), free(hm_out), free(hbm_out);
    nccl->ops->destroy(nccl);
    ft_backend_destroy(be);
    mpi->ops->destroy(mpi);
    if (rank == 0)
        printf("%d checks, %d failed\n", checks, failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
