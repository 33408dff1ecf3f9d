/* The CUDA harness's NCCL on MPI (cudaemu_nccl.c, cudaemu_nccl_types.c), run on 1 to 4
 * ranks (test_emu_nccl.sh). Every collective goes through the pattern of
 * cuda/comm_nccl.c: the input is written on a compute stream, the communication stream
 * waits for it by an event, the collective runs there, and the compute stream waits for
 * the collective's event before reading the result back. Checked against values every
 * rank computes locally for all ranks:
 *  - all-reduce, reduce, reduce-scatter, all-gather, broadcast; fp32 and bf16 (sum, max,
 *    min), int32 and int8 sums, uint8 gathers; in place (NCCL's layouts) and out of place;
 *  - bf16 sums rounded to nearest even (2 ranks: one addition, so a known result);
 *  - a group: nothing is exchanged before ncclGroupEnd, everything right after;
 *  - two communicators over halves of the ranks (the id decides who is together); ranks
 *    that disagree on nranks or claim one rank twice are all refused;
 *  - findings: a count larger than the buffers (send side, and the gathered side), and a
 *    compute stream that reads the result without waiting for the collective's event;
 *    with the check off, that read sees the stale (poisoned) buffer.
 * A failed check aborts every rank (MPI_Abort), so a failure cannot leave ranks stuck in
 * unmatched collectives. */
#include "emu_test_util.h"

#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>

#include "cudaemu.h"
#include "util/bf16.h"

static int g_rank, g_size;
static ncclComm_t g_comm;
static cudaStream_t g_compute, g_comm_stream;

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", g_rank, __FILE__, __LINE__,      \
                    #cond);                                                                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)
#define OK(call) REQUIRE((call) == cudaSuccess)
#define NOK(call) REQUIRE((call) == ncclSuccess)

/* ------------------------------------------------------------ values */

static int is_unsigned(ncclDataType_t t) { return t == ncclUint8; }

/* Rank r's i-th input: small integers, exact in every type and in every sum of 4. */
static double value(ncclDataType_t t, int r, size_t i)
{
    int v = (int)(((size_t)(r + 1) * (i % 5 + 1) + i / 5) % 13);
    return is_unsigned(t) ? v : v - 6;
}

static size_t tsize(ncclDataType_t t)
{
    return t == ncclFloat32 || t == ncclInt32 ? 4 : t == ncclBfloat16 ? 2 : 1;
}

static void put(ncclDataType_t t, void *p, size_t i, double v)
{
    switch (t) {
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclBfloat16: ((uint16_t *)p)[i] = ft_f32_to_bf16((float)v); break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

static double get(ncclDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case ncclFloat32: return ((const float *)p)[i];
    case ncclBfloat16: return ft_bf16_to_f32(((const uint16_t *)p)[i]);
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclInt8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static double combine(ncclRedOp_t op, double a, double b)
{
    return op == ncclSum ? a + b : op == ncclMax ? fmax(a, b) : fmin(a, b);
}

static double reduced(ncclDataType_t t, ncclRedOp_t op, size_t i)
{
    double acc = value(t, 0, i);
    for (int r = 1; r < g_size; r++)
        acc = combine(op, acc, value(t, r, i));
    return acc;
}

/* ------------------------------------------------------------ the comm_nccl.c pattern */

/* Orders the communication stream after the compute stream's work so far. */
static void comm_follows_compute(void)
{
    cudaEvent_t ready;
    OK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    OK(cudaEventRecord(ready, g_compute));
    OK(cudaStreamWaitEvent(g_comm_stream, ready, 0));
    OK(cudaEventDestroy(ready));
}

static void compute_waits_comm(void)
{
    cudaEvent_t done;
    OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    OK(cudaEventRecord(done, g_comm_stream));
    OK(cudaStreamWaitEvent(g_compute, done, 0));
    OK(cudaEventDestroy(done));
}

typedef enum { ALL_REDUCE, REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST } kind;

/* One collective of `count` (NCCL's count) elements, checked against local values. */
static void check_collective(kind k, ncclDataType_t t, ncclRedOp_t op, int in_place, size_t count)
{
    const size_t P = (size_t)g_size, me = (size_t)g_rank, sz = tsize(t);
    const int root = k == BROADCAST ? g_size - 1 : 0;
    size_t send_n = k == REDUCE_SCATTER ? P * count : count;
    size_t recv_n = k == ALL_GATHER ? P * count : count;
    unsigned char *send_h = malloc(send_n * sz), *got = malloc(recv_n * sz);
    for (size_t i = 0; i < send_n; i++)
        put(t, send_h, i, value(t, g_rank, i));

    /* Device buffers: one for in place (NCCL's layouts), two otherwise. */
    size_t big = (send_n > recv_n ? send_n : recv_n) * sz;
    char *buf = NULL, *other = NULL;
    OK(cudaMalloc((void **)&buf, big));
    char *send = buf, *recv = buf;
    if (in_place) {
        if (k == ALL_GATHER)
            send = buf + me * count * sz;
        if (k == REDUCE_SCATTER)
            recv = buf + me * count * sz;
    } else {
        OK(cudaMalloc((void **)&other, recv_n * sz));
        recv = other;
    }
    OK(cudaMemcpyAsync(send, send_h, send_n * sz, cudaMemcpyHostToDevice, g_compute));
    comm_follows_compute();
    ncclResult_t r = ncclSuccess;
    switch (k) {
    case ALL_REDUCE: r = ncclAllReduce(send, recv, count, t, op, g_comm, g_comm_stream); break;
    case REDUCE: r = ncclReduce(send, recv, count, t, op, root, g_comm, g_comm_stream); break;
    case REDUCE_SCATTER:
        r = ncclReduceScatter(send, recv, count, t, op, g_comm, g_comm_stream);
        break;
    case ALL_GATHER: r = ncclAllGather(send, recv, count, t, g_comm, g_comm_stream); break;
    case BROADCAST: r = ncclBroadcast(send, recv, count, t, root, g_comm, g_comm_stream); break;
    }
    NOK(r);
    compute_waits_comm();
    OK(cudaMemcpyAsync(got, recv, recv_n * sz, cudaMemcpyDeviceToHost, g_compute));

    int has_result = k != REDUCE || g_rank == root;
    for (size_t i = 0; has_result && i < recv_n; i++) {
        double want = 0;
        switch (k) {
        case ALL_REDUCE: case REDUCE: want = reduced(t, op, i); break;
        case REDUCE_SCATTER: want = reduced(t, op, me * count + i); break;
        case ALL_GATHER: want = value(t, (int)(i / count), i % count); break;
        case BROADCAST: want = value(t, root, i); break;
        }
        if (get(t, got, i) != want) {
            fprintf(stderr, "rank %d: kind %d type %d op %d in_place %d: [%zu] = %g, want %g\n",
                    g_rank, (int)k, (int)t, (int)op, in_place, i, get(t, got, i), want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    OK(cudaStreamSynchronize(g_comm_stream));
    OK(cudaFree(buf));
    OK(cudaFree(other));
    free(send_h);
    free(got);
}

static void test_collectives(void **state)
{
    (void)state;
    static const ncclDataType_t floats[] = { ncclFloat32, ncclBfloat16 };
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int f = 0; f < 2; f++) {
            check_collective(ALL_REDUCE, floats[f], ncclSum, in_place, 37);
            check_collective(ALL_REDUCE, floats[f], ncclMax, in_place, 37);
            check_collective(ALL_REDUCE, floats[f], ncclMin, in_place, 37);
            check_collective(REDUCE_SCATTER, floats[f], ncclSum, in_place, 11);
            check_collective(REDUCE_SCATTER, floats[f], ncclMax, in_place, 11);
            check_collective(ALL_GATHER, floats[f], ncclSum, in_place, 13);
            check_collective(BROADCAST, floats[f], ncclSum, in_place, 29);
            check_collective(REDUCE, floats[f], ncclSum, in_place, 23);
        }
        check_collective(ALL_REDUCE, ncclInt32, ncclSum, in_place, 19);
        check_collective(ALL_REDUCE, ncclInt8, ncclSum, in_place, 19);
        check_collective(REDUCE_SCATTER, ncclInt32, ncclMin, in_place, 7);
        check_collective(ALL_GATHER, ncclUint8, ncclSum, in_place, 1001);
        check_collective(BROADCAST, ncclUint8, ncclSum, in_place, 1001);
    }
}

/* With two ranks a bf16 sum is one addition, rounded once, to nearest even. */
static void test_bf16_rounding(void **state)
{
    (void)state;
    if (g_size != 2)
        return;
    /* rank 0 + rank 1 = exact sum -> bf16 */
    static const uint16_t mine[2][2] = { { 0x3f80, 0x3f81 }, { 0x3b80, 0x3b80 } };
    static const uint16_t want[2] = { 0x3f80,  /* 1 + 2^-8: tie, down to even 1.0 */
                                      0x3f82 }; /* 1 + 2^-7 + 2^-8: tie, up to even */
    uint16_t *d = NULL, got[2];
    OK(cudaMalloc((void **)&d, sizeof got));
    OK(cudaMemcpy(d, mine[g_rank], sizeof got, cudaMemcpyHostToDevice));
    NOK(ncclAllReduce(d, d, 2, ncclBfloat16, ncclSum, g_comm, g_comm_stream));
    OK(cudaStreamSynchronize(g_comm_stream));
    OK(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost));
    REQUIRE(got[0] == want[0] && got[1] == want[1]);
    OK(cudaFree(d));
}

static void test_group(void **state)
{
    (void)state;
    float *a = NULL, *b = NULL, ha[8], hb_all[64];
    for (int i = 0; i < 8; i++)
        ha[i] = (float)(g_rank + i);
    OK(cudaMalloc((void **)&a, sizeof ha));
    OK(cudaMalloc((void **)&b, sizeof ha * (size_t)g_size));
    OK(cudaMemcpy(a, ha, sizeof ha, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(b + 8 * g_rank, ha, sizeof ha, cudaMemcpyHostToDevice));
    NOK(ncclGroupStart());
    NOK(ncclAllGather(b + 8 * g_rank, b, 8, ncclFloat32, g_comm, g_comm_stream));
    NOK(ncclAllReduce(a, a, 8, ncclFloat32, ncclSum, g_comm, g_comm_stream));
    REQUIRE(cudaStreamQuery(g_comm_stream) == cudaSuccess); /* nothing queued yet */
    NOK(ncclGroupEnd());
    REQUIRE(cudaStreamQuery(g_comm_stream) == cudaErrorNotReady); /* landings queued */
    OK(cudaStreamSynchronize(g_comm_stream));
    OK(cudaMemcpy(ha, a, sizeof ha, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(hb_all, b, sizeof ha * (size_t)g_size, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 8; i++) {
        REQUIRE(ha[i] == (float)(g_size * i + g_size * (g_size - 1) / 2));
        for (int q = 0; q < g_size; q++)
            REQUIRE(hb_all[8 * q + i] == (float)(q + i));
    }
    REQUIRE(ncclGroupEnd() == ncclInvalidUsage);
    OK(cudaFree(a));
    OK(cudaFree(b));
}

/* Two communicators: even and odd ranks, each with its own id. */
static void test_split_communicators(void **state)
{
    (void)state;
    MPI_Comm half;
    int colour = g_rank % 2, half_rank = 0, half_size = 0;
    MPI_Comm_split(MPI_COMM_WORLD, colour, g_rank, &half);
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);
    ncclUniqueId id;
    if (half_rank == 0)
        NOK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, half);
    ncclComm_t c;
    NOK(ncclCommInitRank(&c, half_size, id, half_rank));
    int n = 0, me = -1;
    NOK(ncclCommCount(c, &n));
    NOK(ncclCommUserRank(c, &me));
    REQUIRE(n == half_size && me == half_rank);
    int32_t *d = NULL, v = g_rank, sum = 0;
    OK(cudaMalloc((void **)&d, sizeof v));
    OK(cudaMemcpy(d, &v, sizeof v, cudaMemcpyHostToDevice));
    NOK(ncclAllReduce(d, d, 1, ncclInt32, ncclSum, c, g_comm_stream));
    OK(cudaStreamSynchronize(g_comm_stream));
    OK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
    for (int r = colour; r < g_size; r += 2)
        sum += r;
    REQUIRE(v == sum);
    OK(cudaFree(d));
    NOK(ncclCommDestroy(c));
    MPI_Comm_free(&half);
}

/* Ranks that disagree on nranks, or claim the same rank, all get ncclInvalidArgument. */
static void test_init_mismatch(void **state)
{
    (void)state;
    ncclUniqueId id;
    ncclComm_t c = NULL;
    if (g_rank == 0)
        NOK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    REQUIRE(ncclCommInitRank(&c, g_size + 1, id, g_rank) == ncclInvalidArgument && !c);
    if (g_size > 1)
        REQUIRE(ncclCommInitRank(&c, g_size, id, 0) == ncclInvalidArgument && !c);
    REQUIRE(ncclCommInitRank(&c, g_size, id, g_size) == ncclInvalidArgument); /* rank >= nranks */
}

/* ------------------------------------------------------------ findings */

static void allreduce_count_too_big(void *arg)
{
    float *d = NULL;
    (void)arg;
    cudaMalloc((void **)&d, 10 * sizeof(float));
    ncclAllReduce(d, d, 11, ncclFloat32, ncclSum, g_comm, g_comm_stream);
}

static void allgather_recv_too_small(void *arg)
{
    float *s = NULL, *r = NULL;
    (void)arg;
    cudaMalloc((void **)&s, 10 * sizeof(float));
    cudaMalloc((void **)&r, (10 * (size_t)g_size - 1) * sizeof(float));
    ncclAllGather(s, r, 10, ncclFloat32, g_comm, g_comm_stream);
}

typedef struct unwaited {
    float *send, *recv, *out;
} unwaited;

static void copy_floats(void *ctx)
{
    unwaited *u = ctx;
    memcpy(u->out, u->recv, 16 * sizeof(float));
}

/* A "kernel" on the compute stream that reads the collective's result into out. */
static void consume(unwaited *u)
{
    cudaemu_access acc[2] = { { u->recv, 16 * sizeof(float), 0 }, { u->out, 16 * sizeof(float), 1 } };
    cudaemu_enqueue(g_compute, "kernel consume_result (test_emu_nccl.c)", copy_floats, u, NULL,
                    acc, 2);
}

static void read_without_wait(void *arg) { consume(arg); }

static void read_without_wait_unchecked(void *arg)
{
    unwaited *u = arg;
    float h[16];
    cudaemu_set_racecheck(0);
    consume(u);
    cudaMemcpyAsync(h, u->out, sizeof h, cudaMemcpyDeviceToHost, g_compute);
    int stale = 0;
    for (int i = 0; i < 16; i++)
        stale += isnan(h[i]) ? 1 : 0;
    _exit(stale == 16 ? 0 : 1);
}

static void test_findings(void **state)
{
    (void)state;
    expect_finding(allreduce_count_too_big, NULL, "ncclAllReduce", "sendbuff (44 bytes for count 11",
                   "runs 4 bytes past the end", NULL);
    expect_finding(allgather_recv_too_small, NULL, "ncclAllGather", "recvbuff",
                   "times nranks", "runs 4 bytes past the end", NULL);

    unwaited u;
    float h[16];
    for (int i = 0; i < 16; i++)
        h[i] = 1.0f;
    OK(cudaMalloc((void **)&u.send, sizeof h));
    OK(cudaMalloc((void **)&u.recv, sizeof h)); /* poisoned: NaN until the landing */
    OK(cudaMalloc((void **)&u.out, sizeof h));
    OK(cudaMemcpy(u.send, h, sizeof h, cudaMemcpyHostToDevice));
    OK(cudaMemset(u.out, 0, sizeof h)); /* so a NaN in out proves the read of recv ran */
    OK(cudaDeviceSynchronize());
    NOK(ncclAllReduce(u.send, u.recv, 16, ncclFloat32, ncclSum, g_comm, g_comm_stream));
    expect_finding(read_without_wait, &u, "race on device allocation",
                   "kernel consume_result (test_emu_nccl.c) on stream",
                   "is not ordered after ncclAllReduce on stream", "which wrote bytes [0, 64)",
                   NULL);
    child_result r = run_in_child(read_without_wait_unchecked, &u);
    if (r.exit_code != 0)
        fprintf(stderr, "rank %d: the unwaited read did not see stale data:\n%s\n", g_rank, r.err);
    REQUIRE(r.exit_code == 0);
    free(r.err);
    /* Waiting for the collective's event: the sum. */
    compute_waits_comm();
    consume(&u);
    OK(cudaMemcpyAsync(h, u.out, sizeof h, cudaMemcpyDeviceToHost, g_compute));
    for (int i = 0; i < 16; i++)
        REQUIRE(h[i] == (float)g_size);
    OK(cudaFree(u.send));
    OK(cudaFree(u.recv));
    OK(cudaFree(u.out));
}

static void test_misc(void **state)
{
    (void)state;
    int n = 0, me = -1;
    ncclResult_t async = ncclInternalError;
    NOK(ncclCommCount(g_comm, &n));
    NOK(ncclCommUserRank(g_comm, &me));
    NOK(ncclCommGetAsyncError(g_comm, &async));
    REQUIRE(n == g_size && me == g_rank && async == ncclSuccess);
    REQUIRE(strcmp(ncclGetErrorString(ncclInvalidArgument), "invalid argument") == 0);
    float *d = NULL;
    OK(cudaMalloc((void **)&d, 4));
    REQUIRE(ncclAllReduce(d, d, 1, ncclFloat16, ncclSum, g_comm, g_comm_stream) ==
            ncclInvalidArgument);
    REQUIRE(ncclAllReduce(d, d, 1, ncclFloat32, ncclAvg, g_comm, g_comm_stream) ==
            ncclInvalidArgument);
    REQUIRE(ncclBroadcast(d, d, 1, ncclFloat32, g_size, g_comm, g_comm_stream) ==
            ncclInvalidArgument);
    OK(cudaFree(d));
}

static int setup(void **state)
{
    (void)state;
    ncclUniqueId id;
    if (g_rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
        return -1;
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (cudaSetDevice(g_rank % 8) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g_compute, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g_comm_stream, cudaStreamNonBlocking) != cudaSuccess)
        return -1;
    return ncclCommInitRank(&g_comm, g_size, id, g_rank) == ncclSuccess ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cudaStreamSynchronize(g_comm_stream);
    cudaStreamSynchronize(g_compute);
    ncclCommDestroy(g_comm);
    cudaStreamDestroy(g_comm_stream);
    cudaStreamDestroy(g_compute);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    unsetenv("CUDAEMU_RACECHECK");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_split_communicators),
        cmocka_unit_test(test_init_mismatch),
        cmocka_unit_test(test_findings),
        cmocka_unit_test(test_misc),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    MPI_Finalize();
    return failed ? 1 : 0;
}
