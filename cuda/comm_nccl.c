/* NCCL implementation of the comm interface, for device buffers of the CUDA backend.
 *
 * Bootstrap: rank 0 creates the NCCL unique id and MPI broadcasts it; every rank
 * binds its GPU by node-local rank (MPI_Comm_split_type SHARED, correct under srun and
 * mpirun alike) before ncclCommInitRank.
 *
 * Streams: collectives run on a communication stream of their own. Each collective
 * first makes that stream wait for an event recorded on the backend's compute stream
 * (so it sees the data the compute stream produced), and records a completion event;
 * ft_comm_wait makes the compute stream wait for that event. No host blocking and no
 * device-wide synchronisation: the host only issues work. Scalar reductions of host
 * values (loss sums, norms, counts) go over MPI.
 *
 * The communication stream has the greatest priority, like the compute stream
 * (cuda_lanes.c): a collective started beside the backward or the forward (the engine's
 * reductions at grad_done, its prefetched and deferred gathers) must get SMs for its
 * blocks while the compute stream keeps the device full, or it would run only in the
 * gaps between compute kernels, and the compute that waits for it later would wait longer.
 * NCCL's kernels take a few SMs (one block a channel).
 */
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "cuda_state.h"

typedef struct nccl_impl {
    ncclComm_t nccl;
    cudaStream_t comm_stream;
    cudaStream_t compute_stream;
    MPI_Comm world, node;
} nccl_impl;

struct ft_comm_request {
    cudaEvent_t done;
};

static nccl_impl *impl_of(ft_comm *c) { return (nccl_impl *)c->impl; }

/* Orders the comm stream after the compute stream's work so far. */
static int follow_compute(nccl_impl *im)
{
    cudaEvent_t ready;
    if (cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) != cudaSuccess)
        return -1;
    int rc = cudaEventRecord(ready, im->compute_stream) != cudaSuccess ||
             cudaStreamWaitEvent(im->comm_stream, ready, 0) != cudaSuccess;
    cudaEventDestroy(ready); /* destruction is deferred until the event completes */
    return rc ? -1 : 0;
}

static int finish(nccl_impl *im, ncclResult_t r, ft_comm_request **req)
{
    if (r != ncclSuccess)
        return -1;
    *req = malloc(sizeof **req);
    if (!*req)
        return -1;
    if (cudaEventCreateWithFlags(&(*req)->done, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord((*req)->done, im->comm_stream) != cudaSuccess) {
        free(*req);
        *req = NULL;
        return -1;
    }
    return 0;
}

static void account(ft_comm *c, double factor, size_t bytes)
{
    c->stats.bytes_sent += (uint64_t)(factor * (double)bytes + 0.5);
    c->stats.n_collectives++;
}

static int nccl_all_reduce_f32(ft_comm *c, float *buf, size_t n, ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    const double p = c->size;
    account(c, 2.0 * (p - 1.0) / p, n * sizeof(float));
    if (follow_compute(im))
        return -1;
    return finish(im, ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, im->nccl, im->comm_stream),
                  req);
}

static int nccl_reduce_scatter_f32(ft_comm *c, float *out, const float *in, size_t count,
                                   ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    const double p = c->size;
    account(c, (p - 1.0) / p, count * (size_t)c->size * sizeof(float));
    if (follow_compute(im))
        return -1;
    return finish(im, ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, im->nccl,
                                        im->comm_stream), req);
}

static int nccl_all_reduce_bf16(ft_comm *c, uint16_t *buf, size_t n, ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    const double p = c->size;
    account(c, 2.0 * (p - 1.0) / p, n * sizeof(uint16_t));
    if (follow_compute(im))
        return -1;
    return finish(im, ncclAllReduce(buf, buf, n, ncclBfloat16, ncclSum, im->nccl,
                                    im->comm_stream), req);
}

static int nccl_reduce_scatter_bf16(ft_comm *c, uint16_t *out, const uint16_t *in, size_t count,
                                    ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    const double p = c->size;
    account(c, (p - 1.0) / p, count * (size_t)c->size * sizeof(uint16_t));
    if (follow_compute(im))
        return -1;
    return finish(im, ncclReduceScatter(in, out, count, ncclBfloat16, ncclSum, im->nccl,
                                        im->comm_stream), req);
}

static int nccl_all_gather(ft_comm *c, void *out, const void *in, size_t bytes,
                           ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    const double p = c->size;
    account(c, (p - 1.0) / p, bytes * (size_t)c->size);
    if (follow_compute(im))
        return -1;
    return finish(im, ncclAllGather(in, out, bytes, ncclUint8, im->nccl, im->comm_stream), req);
}

static int nccl_broadcast(ft_comm *c, void *buf, size_t bytes, int root, ft_comm_request **req)
{
    nccl_impl *im = impl_of(c);
    if (c->rank == root)
        account(c, 1.0, bytes);
    if (follow_compute(im))
        return -1;
    return finish(im, ncclBroadcast(buf, buf, bytes, ncclUint8, root, im->nccl, im->comm_stream),
                  req);
}

static int nccl_wait(ft_comm *c, ft_comm_request *req, ft_error *err)
{
    nccl_impl *im = impl_of(c);
    double t0 = MPI_Wtime();
    cudaError_t e = cudaStreamWaitEvent(im->compute_stream, req->done, 0);
    c->stats.seconds_in_wait += MPI_Wtime() - t0;
    cudaEventDestroy(req->done);
    free(req);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(im->nccl, &async);
    if (async != ncclSuccess)
        return ft_fail(err, "NCCL error on rank %d: %s", c->rank, ncclGetErrorString(async));
    return e == cudaSuccess ? 0
                            : ft_fail(err, "CUDA error waiting for a collective: %s",
                                      cudaGetErrorString(e));
}

static int mpi_reduce(ft_comm *c, void *vals, int n, MPI_Datatype t, MPI_Op op, ft_error *err)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, t, op, impl_of(c)->world);
    return rc == MPI_SUCCESS ? 0 : ft_fail(err, "MPI allreduce failed on rank %d", c->rank);
}

static int nccl_f64_sum(ft_comm *c, double *v, int n, ft_error *err)
{
    return mpi_reduce(c, v, n, MPI_DOUBLE, MPI_SUM, err);
}

static int nccl_i64_sum(ft_comm *c, int64_t *v, int n, ft_error *err)
{
    return mpi_reduce(c, v, n, MPI_INT64_T, MPI_SUM, err);
}

static int nccl_f64_max(ft_comm *c, double *v, int n, ft_error *err)
{
    return mpi_reduce(c, v, n, MPI_DOUBLE, MPI_MAX, err);
}

static int nccl_barrier(ft_comm *c, ft_error *err)
{
    nccl_impl *im = impl_of(c);
    if (cudaStreamSynchronize(im->comm_stream) != cudaSuccess)
        return ft_fail(err, "CUDA error in barrier on rank %d", c->rank);
    return MPI_Barrier(im->world) == MPI_SUCCESS ? 0 : ft_fail(err, "MPI barrier failed");
}

static void nccl_destroy(ft_comm *c)
{
    nccl_impl *im = impl_of(c);
    cudaStreamSynchronize(im->comm_stream);
    ncclCommDestroy(im->nccl);
    cudaStreamDestroy(im->comm_stream);
    MPI_Comm_free(&im->node);
    MPI_Comm_free(&im->world);
    free(im);
    free(c);
}

static const ft_comm_ops nccl_ops = {
    .all_reduce_f32 = nccl_all_reduce_f32,
    .reduce_scatter_f32 = nccl_reduce_scatter_f32,
    .all_reduce_bf16 = nccl_all_reduce_bf16,
    .reduce_scatter_bf16 = nccl_reduce_scatter_bf16,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .wait = nccl_wait,
    .all_reduce_f64_sum = nccl_f64_sum,
    .all_reduce_i64_sum = nccl_i64_sum,
    .all_reduce_f64_max = nccl_f64_max,
    .barrier = nccl_barrier,
    .destroy = nccl_destroy,
};

int ft_comm_nccl_create(ft_comm **out, ft_backend *be, ft_error *err)
{
    *out = NULL;
    if (!be || be->device < 0)
        return ft_fail(err, "NCCL needs the CUDA backend (device = \"cuda\")");
    ft_comm *c = calloc(1, sizeof *c);
    nccl_impl *im = calloc(1, sizeof *im);
    if (!c || !im) {
        free(c);
        free(im);
        return ft_fail(err, "out of host memory");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &im->world);
    MPI_Comm_rank(im->world, &c->rank);
    MPI_Comm_size(im->world, &c->size);
    MPI_Comm_split_type(im->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &im->node);
    MPI_Comm_rank(im->node, &c->local_rank);
    MPI_Comm_size(im->node, &c->local_size);
    im->compute_stream = ft_cuda_state_of(be)->stream;

    ncclUniqueId id;
    ncclResult_t r = ncclSuccess;
    if (c->rank == 0)
        r = ncclGetUniqueId(&id);
    int ok = r == ncclSuccess;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, im->world);
    if (ok) {
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, im->world);
        int least = 0, greatest = 0;
        ok = cudaSetDevice(be->device) == cudaSuccess &&
             cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess &&
             cudaStreamCreateWithPriority(&im->comm_stream, cudaStreamNonBlocking, greatest) ==
                 cudaSuccess &&
             (r = ncclCommInitRank(&im->nccl, c->size, id, c->rank)) == ncclSuccess;
    }
    if (!ok) {
        const int rank = c->rank;
        MPI_Comm_free(&im->node);
        MPI_Comm_free(&im->world);
        free(im);
        free(c);
        return ft_fail(err, "NCCL initialisation failed on rank %d (device %d): %s", rank,
                       be->device, ncclGetErrorString(r));
    }
    c->ops = &nccl_ops;
    c->name = "nccl";
    c->impl = im;
    *out = c;
    return 0;
}
