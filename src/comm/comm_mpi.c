/* MPI implementation of the comm interface: MPI-3 nonblocking collectives on host
 * buffers over a private duplicate of MPI_COMM_WORLD. */
#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/bf16.h"

#ifdef FT_CUDA_EMULATION
#include "../../test/cudaemu/cudaemu.h"
/* Under the CPU execution harness device memory is host memory, so MPI would move a
 * device buffer without complaint; on a GPU, an MPI without CUDA support faults on it
 * (seen on an H200). The harness makes that a finding here. */
static void host_only(const void *p, const char *who)
{
    void *base;
    size_t bytes;
    if (p && cudaemu_find_alloc(p, &base, &bytes) == 0)
        cudaemu_fail("MPI %s given device memory %p: device buffers go through the NCCL "
                     "communicator", who, p);
}
#else
static void host_only(const void *p, const char *who) { (void)p, (void)who; }
#endif

typedef struct mpi_comm_impl {
    MPI_Comm world;
    MPI_Comm node; /* ranks sharing this node's memory: gives the node-local rank */
    MPI_Datatype bf16;
    MPI_Op bf16_sum;
} mpi_comm_impl;

/* MPI has no bfloat16: a 2-byte type and a user-defined sum over it. */
static void bf16_sum_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = ft_f32_to_bf16(ft_bf16_to_f32(a[i]) + ft_bf16_to_f32(b[i]));
}

struct ft_comm_request {
    MPI_Request req;
    /* in-place reduce-scatter: MPI leaves the result at the start of the input (result),
     * the wait moves it to the rank's own place (landing); NULL otherwise */
    void *landing, *result;
    size_t result_bytes;
};

static MPI_Comm world_of(ft_comm *c) { return ((mpi_comm_impl *)c->impl)->world; }

static int mpi_failed(int rc, const char *what, ft_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return ft_fail(err, "MPI %s failed: %s", what, text);
}

static int new_request(ft_comm_request **req)
{
    *req = calloc(1, sizeof **req);
    if (!*req)
        return -1;
    (*req)->req = MPI_REQUEST_NULL; /* a call that fails leaves a request wait can take */
    return 0;
}

/* A reduce-scatter of `bytes` a rank from in into out, in place when out == in + rank *
 * bytes (the engine's ZeRO-1 gradients). MPI forbids aliased buffers; its own in-place
 * form (MPI_IN_PLACE as the send buffer) takes the input from the receive buffer and
 * leaves the rank's result at its start, so the wait moves it to out: no extra memory.
 * Sets *send and *recv for the call. */
static void scatter_buffers(ft_comm *c, void *out, const void *in, size_t bytes,
                            ft_comm_request *req, const void **send, void **recv)
{
    *send = in;
    *recv = out;
    if ((const char *)out != (const char *)in + (size_t)c->rank * bytes)
        return;
    *send = MPI_IN_PLACE;
    *recv = (void *)in; /* the input, and where the result lands: its start */
    if (c->rank > 0) {  /* the start is rank 0's slice: moved to out by the wait */
        req->result = (void *)in;
        req->landing = out;
        req->result_bytes = bytes;
    }
}

/* MPI counts are int; our buffers can exceed 2^31 elements only at sizes no rank
 * holds per unit today. Refuse rather than truncate. */
static int count_ok(size_t n) { return n <= (size_t)0x7fffffff; }

static void account(ft_comm *c, double ring_factor, size_t bytes)
{
    c->stats.bytes_sent += (uint64_t)(ring_factor * (double)bytes + 0.5);
    c->stats.n_collectives++;
}

/* The all-reduce (sum, in place) of n elements of `elem` bytes, MPI type dtype summed by
 * op: fp32 with MPI's own sum, bf16 with ours. */
static int all_reduce(ft_comm *c, void *buf, size_t n, size_t elem, MPI_Datatype dtype, MPI_Op op,
                      ft_comm_request **req)
{
    if (!count_ok(n) || new_request(req))
        return -1;
    const double p = c->size;
    account(c, 2.0 * (p - 1.0) / p, n * elem);
    host_only(buf, "all_reduce");
    return MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dtype, op, world_of(c), &(*req)->req) ==
                   MPI_SUCCESS ? 0 : -1;
}

/* The reduce-scatter (sum) of count elements a rank, typed as in all_reduce. */
static int reduce_scatter(ft_comm *c, void *out, const void *in, size_t count, size_t elem,
                          MPI_Datatype dtype, MPI_Op op, ft_comm_request **req)
{
    if (!count_ok(count) || new_request(req))
        return -1;
    const double p = c->size;
    account(c, (p - 1.0) / p, count * (size_t)c->size * elem);
    host_only(in, "reduce_scatter");
    host_only(out, "reduce_scatter");
    const void *send;
    void *recv;
    scatter_buffers(c, out, in, count * elem, *req, &send, &recv);
    return MPI_Ireduce_scatter_block(send, recv, (int)count, dtype, op, world_of(c),
                                     &(*req)->req) == MPI_SUCCESS ? 0 : -1;
}

static int mpi_all_reduce_f32(ft_comm *c, float *buf, size_t n, ft_comm_request **req)
{
    return all_reduce(c, buf, n, sizeof(float), MPI_FLOAT, MPI_SUM, req);
}

static int mpi_reduce_scatter_f32(ft_comm *c, float *out, const float *in, size_t count,
                                  ft_comm_request **req)
{
    return reduce_scatter(c, out, in, count, sizeof(float), MPI_FLOAT, MPI_SUM, req);
}

static int mpi_all_reduce_bf16(ft_comm *c, uint16_t *buf, size_t n, ft_comm_request **req)
{
    const mpi_comm_impl *im = c->impl;
    return all_reduce(c, buf, n, sizeof(uint16_t), im->bf16, im->bf16_sum, req);
}

static int mpi_reduce_scatter_bf16(ft_comm *c, uint16_t *out, const uint16_t *in, size_t count,
                                   ft_comm_request **req)
{
    const mpi_comm_impl *im = c->impl;
    return reduce_scatter(c, out, in, count, sizeof(uint16_t), im->bf16, im->bf16_sum, req);
}

static int mpi_all_gather(ft_comm *c, void *out, const void *in, size_t bytes,
                          ft_comm_request **req)
{
    if (!count_ok(bytes) || new_request(req))
        return -1;
    const double p = c->size;
    account(c, (p - 1.0) / p, bytes * (size_t)c->size);
    host_only(in, "all_gather");
    host_only(out, "all_gather");
    /* MPI forbids aliased buffers; the in-place form says so explicitly */
    const bool in_place = (const char *)in == (const char *)out + (size_t)c->rank * bytes;
    return MPI_Iallgather(in_place ? MPI_IN_PLACE : in, (int)bytes, MPI_BYTE, out, (int)bytes,
                          MPI_BYTE, world_of(c), &(*req)->req) == MPI_SUCCESS ? 0 : -1;
}

static int mpi_broadcast(ft_comm *c, void *buf, size_t bytes, int root, ft_comm_request **req)
{
    if (!count_ok(bytes) || new_request(req))
        return -1;
    if (c->rank == root)
        account(c, 1.0, bytes);
    else
        c->stats.n_collectives++;
    host_only(buf, "broadcast");
    return MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, world_of(c), &(*req)->req) == MPI_SUCCESS
               ? 0 : -1;
}

static int mpi_wait(ft_comm *c, ft_comm_request *req, ft_error *err)
{
    double t0 = MPI_Wtime();
    int rc = MPI_Wait(&req->req, MPI_STATUS_IGNORE);
    c->stats.seconds_in_wait += MPI_Wtime() - t0;
    if (req->result && rc == MPI_SUCCESS) /* disjoint: the landing is rank >= 1's slice */
        memcpy(req->landing, req->result, req->result_bytes);
    free(req);
    return rc == MPI_SUCCESS ? 0 : mpi_failed(rc, "wait", err);
}

static int mpi_all_reduce_f64_sum(ft_comm *c, double *vals, int n, ft_error *err)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, MPI_SUM, world_of(c));
    return rc == MPI_SUCCESS ? 0 : mpi_failed(rc, "allreduce", err);
}

static int mpi_all_reduce_i64_sum(ft_comm *c, int64_t *vals, int n, ft_error *err)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, MPI_SUM, world_of(c));
    return rc == MPI_SUCCESS ? 0 : mpi_failed(rc, "allreduce", err);
}

static int mpi_all_reduce_f64_max(ft_comm *c, double *vals, int n, ft_error *err)
{
    int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, MPI_MAX, world_of(c));
    return rc == MPI_SUCCESS ? 0 : mpi_failed(rc, "allreduce", err);
}

static int mpi_barrier(ft_comm *c, ft_error *err)
{
    int rc = MPI_Barrier(world_of(c));
    return rc == MPI_SUCCESS ? 0 : mpi_failed(rc, "barrier", err);
}

static void mpi_destroy(ft_comm *c)
{
    mpi_comm_impl *impl = c->impl;
    MPI_Op_free(&impl->bf16_sum);
    MPI_Type_free(&impl->bf16);
    MPI_Comm_free(&impl->node);
    MPI_Comm_free(&impl->world);
    free(impl);
    free(c);
}

static const ft_comm_ops mpi_ops = {
    .all_reduce_f32 = mpi_all_reduce_f32,
    .reduce_scatter_f32 = mpi_reduce_scatter_f32,
    .all_reduce_bf16 = mpi_all_reduce_bf16,
    .reduce_scatter_bf16 = mpi_reduce_scatter_bf16,
    .all_gather = mpi_all_gather,
    .broadcast = mpi_broadcast,
    .wait = mpi_wait,
    .all_reduce_f64_sum = mpi_all_reduce_f64_sum,
    .all_reduce_i64_sum = mpi_all_reduce_i64_sum,
    .all_reduce_f64_max = mpi_all_reduce_f64_max,
    .barrier = mpi_barrier,
    .destroy = mpi_destroy,
};

int ft_comm_mpi_create(ft_comm **out, ft_error *err)
{
    ft_comm *c = calloc(1, sizeof *c);
    mpi_comm_impl *impl = calloc(1, sizeof *impl);
    if (!c || !impl) {
        free(c);
        free(impl);
        return ft_fail(err, "out of host memory");
    }
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->world);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_rank(impl->world, &c->rank);
        MPI_Comm_size(impl->world, &c->size);
        /* Node-local rank from shared-memory domains: correct under srun and mpirun
         * alike, unlike SLURM_LOCALID under mpirun. */
        rc = MPI_Comm_split_type(impl->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL,
                                 &impl->node);
    }
    if (rc != MPI_SUCCESS) {
        free(c);
        free(impl);
        return mpi_failed(rc, "communicator setup", err);
    }
    MPI_Comm_rank(impl->node, &c->local_rank);
    MPI_Comm_size(impl->node, &c->local_size);
    MPI_Type_contiguous(2, MPI_BYTE, &impl->bf16);
    MPI_Type_commit(&impl->bf16);
    MPI_Op_create(bf16_sum_op, 1, &impl->bf16_sum);
    c->ops = &mpi_ops;
    c->name = "mpi";
    c->impl = impl;
    *out = c;
    return 0;
}
