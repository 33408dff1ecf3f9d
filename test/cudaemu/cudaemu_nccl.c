/* The CPU execution harness for CUDA: NCCL on MPI, with the signatures of <nccl.h>.
 *
 * Communicators. The ranks that call ncclCommInitRank with the same unique id form one
 * MPI communicator: MPI_Comm_split of MPI_COMM_WORLD with a hash of the id as colour and
 * the NCCL rank as key. So every MPI rank must call ncclCommInitRank at the same time
 * (ftmpi's bootstrap does); the new communicator is then checked to have nranks ranks,
 * this rank at position `rank`, and one id throughout.
 *
 * Stream semantics without deadlock. A collective forces its stream (the work queued
 * before it, and what that waits for, runs: its inputs are final), exchanges the data
 * over MPI at once through host staging buffers, and queues the landing of the result
 * in the receive buffer as work on the stream, declaring the accesses (send buffer read,
 * receive buffer written). Ranks call collectives in the same order, so the blocking
 * MPI collectives match, and they cannot deadlock against MPI calls the host makes in
 * program order. Work on another stream that does not wait for the collective's event
 * runs before the landing (laziness) and reads stale data, and the race check reports
 * it. Between ncclGroupStart and ncclGroupEnd, collectives are checked at the call and
 * exchanged at ncclGroupEnd in call order.
 *
 * Counts are NCCL's: all-reduce, reduce, broadcast move `count` elements; reduce-scatter
 * sends nranks * recvcount and receives recvcount; all-gather sends sendcount and
 * receives nranks * sendcount (in place: sendbuff == recvbuff + rank * count for the
 * all-gather, sendbuff + rank * count == recvbuff for the reduce-scatter, as NCCL
 * defines them; staging makes every overlap safe). Each buffer must be a live device
 * range of the size its count implies, or it is a finding. MPI counts are ints: more
 * than 2^31 - 1 elements per call is refused (ncclInvalidArgument). */
#include "cudaemu_nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudaemu_host.h"

#define COMM_MAGIC 0x4e43434cu

struct ncclComm {
    uint32_t magic;
    MPI_Comm mpi; /* owned */
    int rank, nranks, device;
    nccl_types types; /* owned */
    ncclResult_t async;
};

typedef enum { ALL_REDUCE, REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST } coll_kind;

static const char *const g_coll_names[] = { "ncclAllReduce", "ncclReduce", "ncclReduceScatter",
                                            "ncclAllGather", "ncclBroadcast" };

/* One collective call, checked, waiting to be exchanged. */
typedef struct coll {
    coll_kind kind;
    const void *send;
    void *recv;
    size_t count; /* NCCL's count argument */
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
    ncclComm_t comm;
    cudaStream_t stream;
    size_t send_bytes, recv_bytes; /* what this rank reads and writes (0: nothing) */
} coll;

/* Process-wide: the group nesting and the collectives a group has deferred. */
static int g_group_depth;
static coll *g_pending;
static size_t g_pending_n, g_pending_cap;

static int comm_ok(ncclComm_t c) { return c && c->magic == COMM_MAGIC; }

/* ---------------------------------------------------------------- communicators */

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return ncclInvalidArgument;
    memset(uniqueId, 0, sizeof *uniqueId);
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(uniqueId->internal, 1, sizeof uniqueId->internal, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof uniqueId->internal) { /* no /dev/urandom: time and pid still differ */
        uint64_t mix[2] = { (uint64_t)time(NULL), (uint64_t)getpid() };
        memcpy(uniqueId->internal, mix, sizeof mix);
    }
    return ncclSuccess;
}

static int id_colour(const ncclUniqueId *id)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the id's bytes */
    for (size_t i = 0; i < sizeof id->internal; i++)
        h = (h ^ (unsigned char)id->internal[i]) * 1099511628211ull;
    return (int)(h & 0x7fffffff); /* MPI colours are non-negative ints */
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    int mpi_up = 0;
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    *comm = NULL;
    MPI_Initialized(&mpi_up);
    if (!mpi_up) {
        fprintf(stderr, "cudaemu: ncclCommInitRank: NCCL on MPI needs MPI_Init first\n");
        return ncclInvalidUsage;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    if (MPI_Comm_split(MPI_COMM_WORLD, id_colour(&commId), rank, &c->mpi) != MPI_SUCCESS) {
        free(c);
        return ncclSystemError;
    }
    MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
    int size = 0, me = -1;
    MPI_Comm_size(c->mpi, &size);
    MPI_Comm_rank(c->mpi, &me);
    ncclUniqueId first = commId;
    MPI_Bcast(&first, sizeof first, MPI_BYTE, 0, c->mpi);
    int ok = size == nranks && me == rank && memcmp(&first, &commId, sizeof first) == 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c->mpi);
    if (!ok) {
        fprintf(stderr,
                "cudaemu: ncclCommInitRank: rank %d of %d: %d ranks share this id, and this "
                "one is at position %d (every rank of an id must pass the same nranks and a "
                "distinct rank)\n",
                rank, nranks, size, me);
        MPI_Comm_free(&c->mpi);
        free(c);
        return ncclInvalidArgument;
    }
    if (nccl_types_create(&c->types) != 0) {
        MPI_Comm_free(&c->mpi);
        free(c);
        return ncclSystemError;
    }
    c->magic = COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    (void)cudaGetDevice(&c->device);
    c->async = ncclSuccess;
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (!comm_ok(comm))
        return ncclInvalidArgument;
    /* Landings already queued own their staging buffers: nothing refers to comm. */
    nccl_types_free(&comm->types);
    MPI_Comm_free(&comm->mpi);
    comm->magic = 0;
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm_ok(comm) ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm_ok(comm) || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm_ok(comm) || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm_ok(comm) || !device)
        return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm_ok(comm) || !asyncError)
        return ncclInvalidArgument;
    *asyncError = comm->async;
    return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (the emulation's MPI call failed)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "";
}

/* ---------------------------------------------------------------- exchange */

typedef struct landing {
    void *dst;
    void *staged; /* owned: the result of the exchange */
    size_t bytes;
} landing;

static void run_landing(void *ctx)
{
    landing *l = ctx;
    if (l->bytes)
        memcpy(l->dst, l->staged, l->bytes);
}

static void free_landing(void *ctx)
{
    landing *l = ctx;
    free(l->staged);
    free(l);
}

static int mpi_exchange(const coll *c, const void *in, void *out)
{
    ncclComm_t comm = c->comm;
    MPI_Datatype t = nccl_mpi_type(&comm->types, c->type);
    MPI_Op op = nccl_mpi_op(&comm->types, c->type, c->op);
    int n = (int)c->count;
    switch (c->kind) {
    case ALL_REDUCE: return MPI_Allreduce(in, out, n, t, op, comm->mpi);
    case REDUCE: return MPI_Reduce(in, out, n, t, op, c->root, comm->mpi);
    case REDUCE_SCATTER: return MPI_Reduce_scatter_block(in, out, n, t, op, comm->mpi);
    case ALL_GATHER: return MPI_Allgather(in, n, t, out, n, t, comm->mpi);
    case BROADCAST:
        if (comm->rank == c->root)
            memcpy(out, in, c->send_bytes);
        return MPI_Bcast(out, n, t, c->root, comm->mpi);
    }
    return MPI_ERR_OTHER;
}

/* Forces the stream, exchanges, and queues the landing. */
static ncclResult_t execute(const coll *c)
{
    cudaemu_force_stream(c->stream);
    void *in = malloc(c->send_bytes ? c->send_bytes : 1);
    void *out = malloc(c->recv_bytes ? c->recv_bytes : 1);
    landing *l = malloc(sizeof *l);
    if (!in || !out || !l) {
        free(in);
        free(out);
        free(l);
        return ncclSystemError;
    }
    if (c->send_bytes)
        memcpy(in, c->send, c->send_bytes); /* the send buffer as the stream left it */
    int rc = mpi_exchange(c, in, out);
    free(in);
    if (rc != MPI_SUCCESS) {
        free(out);
        free(l);
        c->comm->async = ncclSystemError;
        return ncclSystemError;
    }
    *l = (landing){ c->recv, out, c->recv_bytes };
    cudaemu_access acc[2];
    int n = 0;
    if (c->send_bytes)
        acc[n++] = (cudaemu_access){ c->send, c->send_bytes, 0 };
    if (c->recv_bytes)
        acc[n++] = (cudaemu_access){ c->recv, c->recv_bytes, 1 };
    cudaemu_enqueue(c->stream, g_coll_names[c->kind], run_landing, l, free_landing, acc, n);
    return ncclSuccess;
}

/* ---------------------------------------------------------------- calls */

static void check_buffer(const coll *c, const void *p, size_t bytes, const char *which)
{
    char what[160];
    snprintf(what, sizeof what, "%s (%zu bytes for count %zu of a %zu-byte type%s)", which, bytes,
             c->count, nccl_type_size(c->type),
             (c->kind == REDUCE_SCATTER && which[0] == 's') ||
                     (c->kind == ALL_GATHER && which[0] == 'r')
                 ? ", times nranks"
                 : "");
    cudaemu_check_device_range(p, bytes, g_coll_names[c->kind], what);
}

static ncclResult_t submit(coll c)
{
    if (!comm_ok(c.comm))
        return ncclInvalidArgument;
    size_t size = nccl_type_size(c.type);
    int reduces = c.kind == ALL_REDUCE || c.kind == REDUCE || c.kind == REDUCE_SCATTER;
    if (!size || c.count > 0x7fffffff ||
        (reduces && nccl_mpi_op(&c.comm->types, c.type, c.op) == MPI_OP_NULL) ||
        ((c.kind == REDUCE || c.kind == BROADCAST) && (c.root < 0 || c.root >= c.comm->nranks)))
        return ncclInvalidArgument;
    cudaemu_check_stream(c.stream, g_coll_names[c.kind]);
    size_t one = c.count * size, all = one * (size_t)c.comm->nranks;
    int root = c.comm->rank == c.root;
    switch (c.kind) {
    case ALL_REDUCE: c.send_bytes = one; c.recv_bytes = one; break;
    case REDUCE: c.send_bytes = one; c.recv_bytes = root ? one : 0; break;
    case REDUCE_SCATTER: c.send_bytes = all; c.recv_bytes = one; break;
    case ALL_GATHER: c.send_bytes = one; c.recv_bytes = all; break;
    case BROADCAST: c.send_bytes = root ? one : 0; c.recv_bytes = one; break;
    }
    if (c.count == 0)
        return ncclSuccess;
    if (c.send_bytes)
        check_buffer(&c, c.send, c.send_bytes, "sendbuff");
    if (c.recv_bytes)
        check_buffer(&c, c.recv, c.recv_bytes, "recvbuff");
    if (g_group_depth == 0)
        return execute(&c);
    if (g_pending_n == g_pending_cap) {
        size_t cap = g_pending_cap ? 2 * g_pending_cap : 16;
        coll *v = realloc(g_pending, cap * sizeof *v);
        if (!v)
            return ncclSystemError;
        g_pending = v;
        g_pending_cap = cap;
    }
    g_pending[g_pending_n++] = c;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    g_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (g_group_depth == 0)
        return ncclInvalidUsage;
    if (--g_group_depth > 0)
        return ncclSuccess;
    ncclResult_t first = ncclSuccess;
    for (size_t i = 0; i < g_pending_n; i++) { /* call order: every rank's is the same */
        ncclResult_t r = execute(&g_pending[i]);
        if (first == ncclSuccess)
            first = r;
    }
    g_pending_n = 0;
    return first;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return submit((coll){ .kind = ALL_REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                          .type = datatype, .op = op, .comm = comm, .stream = stream });
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return submit((coll){ .kind = REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                          .type = datatype, .op = op, .root = root, .comm = comm,
                          .stream = stream });
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return submit((coll){ .kind = REDUCE_SCATTER, .send = sendbuff, .recv = recvbuff,
                          .count = recvcount, .type = datatype, .op = op, .comm = comm,
                          .stream = stream });
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return submit((coll){ .kind = ALL_GATHER, .send = sendbuff, .recv = recvbuff,
                          .count = sendcount, .type = datatype, .comm = comm, .stream = stream });
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return submit((coll){ .kind = BROADCAST, .send = sendbuff, .recv = recvbuff, .count = count,
                          .type = datatype, .root = root, .comm = comm, .stream = stream });
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
