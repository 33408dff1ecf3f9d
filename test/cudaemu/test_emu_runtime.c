/* The CUDA harness's runtime (cudaemu_memory.c, cudaemu_stream.c, cudaemu_device.c,
 * cudaemu_runtime.c, cudaemu_errors.c), through the CUDA runtime API as the backend
 * calls it:
 *  - memory: new device memory reads as 0xFF (NaN); find_alloc's boundaries (first and
 *    last byte in, one past out); double, foreign and interior frees are findings;
 *    copies of every kind and memsets give the right bytes; a kind that contradicts the
 *    pointer is a finding; the in-use and peak accounting; cudaFree runs queued work;
 *  - laziness: queued work does not run until forced; forcing a stream runs its work and
 *    exactly what it waits for, through events, and nothing else;
 *  - ordering: an event wait across two streams gives the right data; a missing
 *    cudaStreamWaitEvent is reported naming both operations and the allocation, and with
 *    CUDAEMU_RACECHECK=0 the same program reads stale data; use of memory after
 *    cudaFreeAsync from another stream is reported, and so is freeing memory another
 *    stream uses unordered; the legacy default stream orders with blocking streams and
 *    not with non-blocking ones;
 *  - device: the A100 figures, the opt-in shared memory limit, last/sticky errors; with
 *    CUDAEMU_DEVICE=h100 the H100's, CUDAEMU_DEVICES sets the count, and CUDAEMU_REPORT=1
 *    prints the peak and what is still live at exit. */
#include "emu_test_util.h"

#include <math.h>
#include <stdint.h>

#include "cudaemu.h"

#define CHECK(call) assert_int_equal((call), cudaSuccess)

/* ------------------------------------------------------------ helpers */

/* Work that counts its runs: to watch laziness. */
typedef struct counter {
    int runs;
    int order; /* the value of *clock when it ran */
    int *clock;
} counter;

static void count_run(void *ctx)
{
    counter *c = ctx;
    c->runs++;
    c->order = ++*c->clock;
}

static void enqueue_counter(cudaStream_t s, counter *c, void *p, size_t bytes, int write)
{
    cudaemu_access a = { p, bytes, write };
    cudaemu_enqueue(s, "kernel counting_kernel (test_emu_runtime.c)", count_run, c, NULL, &a,
                    p ? 1 : 0);
}

static float *dev_floats(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n * sizeof(float)));
    return p;
}

/* ------------------------------------------------------------ memory */

static void test_poison_visible(void **state)
{
    (void)state;
    float *d = dev_floats(33);
    float h[33];
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    const unsigned char *bytes = (const unsigned char *)h;
    for (size_t i = 0; i < sizeof h; i++)
        assert_int_equal(bytes[i], 0xFF);
    for (int i = 0; i < 33; i++)
        assert_true(isnan(h[i]));
    CHECK(cudaFree(d));
}

static void test_find_alloc_boundaries(void **state)
{
    (void)state;
    char *d = NULL;
    CHECK(cudaMalloc((void **)&d, 100));
    void *base = NULL;
    size_t bytes = 0;
    assert_int_equal(cudaemu_find_alloc(d, &base, &bytes), 0);
    assert_ptr_equal(base, d);
    assert_int_equal(bytes, 100);
    assert_int_equal(cudaemu_find_alloc(d + 99, &base, &bytes), 0);
    assert_ptr_equal(base, d);
    assert_int_equal(cudaemu_find_alloc(d + 100, NULL, NULL), -1);
    assert_int_equal(cudaemu_find_alloc(d - 1, NULL, NULL), -1);
    char host[8];
    assert_int_equal(cudaemu_find_alloc(host, NULL, NULL), -1);
    cudaemu_check_device_range(d, 100, "test", "whole");
    cudaemu_check_device_range(d + 99, 1, "test", "last byte");
    cudaemu_check_device_range(NULL, 0, "test", "null");
    assert_int_equal((uintptr_t)d % 256, 0); /* CUDA's allocation alignment */
    CHECK(cudaFree(d));
    assert_int_equal(cudaemu_find_alloc(d, NULL, NULL), -1);
}

static void range_one_past(void *arg)
{
    char *d = NULL;
    (void)arg;
    cudaMalloc((void **)&d, 100);
    cudaemu_check_device_range(d + 1, 100, "cublasLtMatmul", "A");
}

static void double_free(void *arg)
{
    void *d = NULL;
    (void)arg;
    cudaMalloc(&d, 64);
    cudaFree(d);
    cudaFree(d);
}

static void foreign_free(void *arg)
{
    static char host[64];
    (void)arg;
    cudaFree(host);
}

static void interior_free(void *arg)
{
    char *d = NULL;
    (void)arg;
    cudaMalloc((void **)&d, 64);
    cudaFreeAsync(d + 8, NULL);
}

static void test_bad_frees_and_ranges(void **state)
{
    (void)state;
    expect_finding(range_one_past, NULL, "cublasLtMatmul", "A = ", "runs 1 bytes past", NULL);
    expect_finding(double_free, NULL, "cudaFree", "not a live device allocation",
                   "freed by cudaFree", NULL);
    expect_finding(foreign_free, NULL, "cudaFree", "not a live device allocation", NULL);
    expect_finding(interior_free, NULL, "cudaFreeAsync", "points 8 bytes into", NULL);
}

static void test_memcpy_kinds(void **state)
{
    (void)state;
    enum { N = 257 };
    float src[N], back[N];
    for (int i = 0; i < N; i++)
        src[i] = (float)i * 0.5f - 3.0f;
    float *a = dev_floats(N), *b = dev_floats(N);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    CHECK(cudaMemcpyAsync(a, src, sizeof src, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(b, a, sizeof src, cudaMemcpyDeviceToDevice, s));
    memset(back, 0, sizeof back);
    CHECK(cudaMemcpyAsync(back, b, sizeof back, cudaMemcpyDeviceToHost, s)); /* pageable */
    assert_memory_equal(back, src, sizeof src);

    /* Default: directions inferred from the pointers. */
    float twice[N];
    for (int i = 0; i < N; i++)
        twice[i] = 2.0f * src[i];
    CHECK(cudaMemcpyAsync(a, twice, sizeof twice, cudaMemcpyDefault, s));
    CHECK(cudaMemcpyAsync(b, a, sizeof twice, cudaMemcpyDefault, s));
    CHECK(cudaMemcpyAsync(back, b, sizeof back, cudaMemcpyDefault, s));
    assert_memory_equal(back, twice, sizeof twice);

    /* Memset, then the synchronous API on the legacy stream (ordered after s by a sync). */
    CHECK(cudaMemsetAsync(a, 0, sizeof src, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(back, a, sizeof back, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        assert_true(back[i] == 0.0f);
    CHECK(cudaMemset(a, 0x3f, 4));
    CHECK(cudaMemcpy(back, a, 4, cudaMemcpyDeviceToHost));
    uint32_t bits;
    memcpy(&bits, back, 4);
    assert_int_equal(bits, 0x3f3f3f3fu);
    assert_int_equal(cudaMemcpy(back, a, 4, (enum cudaMemcpyKind)7),
                     cudaErrorInvalidMemcpyDirection);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);

    /* Pageable sources are staged at the call: changing them afterwards changes nothing. */
    float one[4] = { 1, 2, 3, 4 }, got[4];
    CHECK(cudaMemcpyAsync(a, one, sizeof one, cudaMemcpyHostToDevice, s));
    one[0] = 99;
    CHECK(cudaMemcpyAsync(got, a, sizeof got, cudaMemcpyDeviceToHost, s));
    assert_true(got[0] == 1.0f);

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
}

static void kind_contradicts(void *arg)
{
    float *d = NULL, h[4];
    (void)arg;
    cudaMalloc((void **)&d, sizeof h);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice); /* src and dst swapped */
}

static void copy_past_end(void *arg)
{
    float *d = NULL, h[5] = { 0 };
    (void)arg;
    cudaMalloc((void **)&d, 4 * sizeof(float));
    cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
}

static void test_memcpy_findings(void **state)
{
    (void)state;
    expect_finding(kind_contradicts, NULL, "cudaMemcpy(HostToDevice)", "src = ", "is device memory",
                   NULL);
    expect_finding(copy_past_end, NULL, "cudaMemcpy(HostToDevice)", "dst", "runs 4 bytes past",
                   NULL);
}

static void test_peak_accounting(void **state)
{
    (void)state;
    size_t base_use = 0, peak = 0;
    cudaemu_memory_usage(&base_use, NULL);
    cudaemu_memory_reset_peak();
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK(cudaMalloc(&a, 1000));
    CHECK(cudaMallocAsync(&b, 3000, NULL));
    size_t in_use = 0;
    cudaemu_memory_usage(&in_use, &peak);
    assert_int_equal(in_use, base_use + 4000);
    assert_int_equal(peak, base_use + 4000);
    CHECK(cudaFreeAsync(b, NULL)); /* counted out at the call, as the pool sees it */
    CHECK(cudaMalloc(&c, 500));
    cudaemu_memory_usage(&in_use, &peak);
    assert_int_equal(in_use, base_use + 1500);
    assert_int_equal(peak, base_use + 4000);
    size_t free_b = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_b, &total));
    assert_int_equal(total, (size_t)80 << 30);
    assert_int_equal(free_b, total - in_use);
    /* Larger than the device: refused, not sticky. */
    void *huge = NULL;
    assert_int_equal(cudaMalloc(&huge, (size_t)81 << 30), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    /* Pool high-water mark: reads the peak; reset with 0. */
    cudaMemPool_t pool;
    uint64_t high = 0, keep = UINT64_MAX, back = 0;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high));
    assert_int_equal(high, base_use + 4000);
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &back));
    assert_true(back == UINT64_MAX);
    CHECK(cudaFree(a));
    CHECK(cudaFree(c));
    cudaemu_memory_usage(&in_use, NULL);
    assert_int_equal(in_use, base_use);
}

/* ------------------------------------------------------------ laziness */

static void test_laziness(void **state)
{
    (void)state;
    int clock = 0;
    counter a1 = { 0, 0, &clock }, a2 = { 0, 0, &clock }, b1 = { 0, 0, &clock };
    cudaStream_t sa, sb;
    cudaEvent_t ev;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    enqueue_counter(sa, &a1, NULL, 0, 0);
    CHECK(cudaEventRecord(ev, sa));
    enqueue_counter(sa, &a2, NULL, 0, 0);
    CHECK(cudaStreamWaitEvent(sb, ev, 0));
    enqueue_counter(sb, &b1, NULL, 0, 0);
    assert_int_equal(a1.runs + a2.runs + b1.runs, 0); /* queued, not run */

    /* Forcing sb runs its work and what it waits for (a1), not a2. */
    CHECK(cudaStreamSynchronize(sb));
    assert_int_equal(a1.runs, 1);
    assert_int_equal(b1.runs, 1);
    assert_int_equal(a2.runs, 0);
    assert_true(a1.order < b1.order);

    assert_int_equal(cudaStreamQuery(sa), cudaErrorNotReady); /* a2 pending; query runs it */
    assert_int_equal(a2.runs, 1);
    assert_int_equal(cudaStreamQuery(sa), cudaSuccess);

    /* A pinned destination is written only when forced; pageable forces at once. */
    float *d = dev_floats(4), *pinned = NULL;
    CHECK(cudaMallocHost((void **)&pinned, 4 * sizeof(float)));
    pinned[0] = 7.0f;
    CHECK(cudaMemsetAsync(d, 0, 4 * sizeof(float), sa));
    CHECK(cudaMemcpyAsync(pinned, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, sa));
    assert_true(pinned[0] == 7.0f);
    CHECK(cudaEventRecord(ev, sa));
    CHECK(cudaEventSynchronize(ev));
    assert_true(pinned[0] == 0.0f);

    /* cudaFree synchronises the device first: queued work runs. */
    counter late = { 0, 0, &clock };
    enqueue_counter(sb, &late, d, 4, 0);
    CHECK(cudaFree(d));
    assert_int_equal(late.runs, 1);

    CHECK(cudaFreeHost(pinned));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(sa));
    CHECK(cudaStreamDestroy(sb));
}

/* ------------------------------------------------------------ ordering */

enum { ORD_N = 64 };

/* sa uploads new values into buf, sb copies buf to out (waiting for sa's event unless
 * `skip_wait`), and the host reads out back. */
static void producer_consumer(int skip_wait, float *result)
{
    float fresh[ORD_N];
    for (int i = 0; i < ORD_N; i++)
        fresh[i] = (float)(i + 1);
    float *buf = dev_floats(ORD_N), *out = dev_floats(ORD_N);
    cudaStream_t sa, sb;
    cudaEvent_t written;
    cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
    cudaMemcpyAsync(buf, fresh, sizeof fresh, cudaMemcpyHostToDevice, sa);
    cudaEventRecord(written, sa);
    if (!skip_wait)
        cudaStreamWaitEvent(sb, written, 0);
    cudaMemcpyAsync(out, buf, sizeof fresh, cudaMemcpyDeviceToDevice, sb);
    cudaMemcpyAsync(result, out, sizeof fresh, cudaMemcpyDeviceToHost, sb);
    cudaDeviceSynchronize();
    cudaEventDestroy(written);
    cudaStreamDestroy(sa);
    cudaStreamDestroy(sb);
    cudaFree(buf);
    cudaFree(out);
}

static void test_event_ordering(void **state)
{
    (void)state;
    float got[ORD_N];
    producer_consumer(0, got);
    for (int i = 0; i < ORD_N; i++)
        assert_true(got[i] == (float)(i + 1));
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void missing_wait(void *arg)
{
    float got[ORD_N];
    (void)arg;
    producer_consumer(1, got);
}

static const char *g_self; /* argv[0], to re-run this program with another environment */

/* With the checker off, the consumer runs before the producer: it reads the poison. */
static void missing_wait_unchecked(void *arg)
{
    (void)arg;
    setenv("CUDAEMU_RACECHECK", "0", 1);
    execl("/proc/self/exe", g_self, "--stale-read", (char *)NULL);
    _exit(99);
}

static int stale_read_main(void)
{
    float got[ORD_N];
    producer_consumer(1, got);
    int stale = 0;
    for (int i = 0; i < ORD_N; i++)
        stale += isnan(got[i]) ? 1 : 0;
    printf("%d of %d values stale\n", stale, ORD_N);
    return stale == ORD_N ? 0 : 1;
}

static void test_missing_wait(void **state)
{
    (void)state;
    expect_finding(missing_wait, NULL, "race on device allocation #",
                   "cudaMemcpyAsync(DeviceToDevice) on stream", "reads bytes [0, 256)",
                   "is not ordered after cudaMemcpyAsync(HostToDevice) on stream",
                   "which wrote bytes [0, 256)", NULL);
    child_result r = run_in_child(missing_wait_unchecked, NULL);
    if (r.exit_code != 0)
        fprintf(stderr, "%s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    free(r.err);
}

static void use_after_free_async(void *arg)
{
    cudaStream_t sa, sb;
    float *d = dev_floats(16);
    (void)arg;
    cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
    cudaFreeAsync(d, sa);
    cudaMemsetAsync(d, 0, 16, sb);
}

static void free_async_unordered(void *arg)
{
    cudaStream_t sa, sb;
    float *d = dev_floats(16);
    (void)arg;
    cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking);
    cudaMemsetAsync(d, 0, 16, sb);
    cudaFreeAsync(d, sa); /* sb may still be writing it */
}

static void test_free_async(void **state)
{
    (void)state;
    expect_finding(use_after_free_async, NULL, "cudaMemsetAsync",
                   "not inside a live device allocation", "freed by cudaFreeAsync", NULL);
    expect_finding(free_async_unordered, NULL, "race on device allocation",
                   "cudaFreeAsync on stream", "not ordered after cudaMemsetAsync", NULL);
    /* Ordered: free on the stream that used it, then the block is released when run. */
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *d = dev_floats(16);
    CHECK(cudaMemsetAsync(d, 0, 16, s));
    CHECK(cudaFreeAsync(d, s));
    assert_int_equal(cudaemu_find_alloc(d, NULL, NULL), -1);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
}

/* The legacy default stream orders with blocking streams: no finding, right data.
 * Returns 0 when the data are right (no cmocka assert: children run this too). */
static int legacy_with(unsigned flags)
{
    cudaStream_t s;
    float *d = dev_floats(4), h[4] = { 1, 2, 3, 4 }, back[4];
    cudaStreamCreateWithFlags(&s, flags);
    cudaMemsetAsync(d, 0, sizeof h, s);
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, NULL);
    cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s);
    int wrong = memcmp(back, h, sizeof h) != 0;
    cudaStreamDestroy(s);
    cudaFree(d);
    return wrong;
}

static void legacy_nonblocking(void *arg)
{
    (void)arg;
    (void)legacy_with(cudaStreamNonBlocking);
}

static void test_legacy_stream(void **state)
{
    (void)state;
    assert_int_equal(legacy_with(cudaStreamDefault), 0);
    expect_finding(legacy_nonblocking, NULL, "race", "the legacy default stream", NULL);
}

/* Stream priorities (the CUDA backend's two lanes): a real device's range, greatest
 * numerically smaller; a stream of either priority, or one outside the range (CUDA
 * clamps it), is an ordinary stream; flags are checked as cudaStreamCreateWithFlags's. */
static void test_stream_priorities(void **state)
{
    (void)state;
    int least = 1, greatest = 1;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    assert_int_equal(least, 0);
    assert_true(greatest < least);
    CHECK(cudaDeviceGetStreamPriorityRange(NULL, &greatest)); /* either may be NULL */
    cudaStream_t hi, lo, out_of_range, bad;
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
    CHECK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, least));
    CHECK(cudaStreamCreateWithPriority(&out_of_range, cudaStreamDefault, greatest - 10));
    assert_int_equal(cudaStreamCreateWithPriority(&bad, 0x40u, least), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    float *buf = dev_floats(4);
    CHECK(cudaMemsetAsync(buf, 0, 4 * sizeof(float), hi));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CHECK(cudaEventRecord(done, hi));
    CHECK(cudaStreamWaitEvent(lo, done, 0));
    CHECK(cudaMemsetAsync(buf, 1, 4 * sizeof(float), lo)); /* ordered after hi's */
    CHECK(cudaStreamSynchronize(lo));
    CHECK(cudaEventDestroy(done));
    CHECK(cudaFree(buf));
    CHECK(cudaStreamDestroy(hi));
    CHECK(cudaStreamDestroy(lo));
    CHECK(cudaStreamDestroy(out_of_range));
}

/* Hundreds of thousands of operations on two streams that hand a buffer back and forth
 * stay fast: the shadow records do not pile up. */
static void test_many_ops(void **state)
{
    (void)state;
    cudaStream_t sa, sb;
    cudaEvent_t ea, eb;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
    float *d = dev_floats(1024);
    int clock = 0;
    counter c = { 0, 0, &clock };
    for (int i = 0; i < 100000; i++) {
        enqueue_counter(sa, &c, d + (i % 8) * 128, 512, 1);
        CHECK(cudaEventRecord(ea, sa));
        CHECK(cudaStreamWaitEvent(sb, ea, 0));
        enqueue_counter(sb, &c, d, 4096, 0);
        CHECK(cudaEventRecord(eb, sb));
        CHECK(cudaStreamWaitEvent(sa, eb, 0));
    }
    CHECK(cudaStreamSynchronize(sa)); /* one forced chain through 400000 waits */
    assert_int_equal(c.runs, 200000);
    CHECK(cudaEventDestroy(ea));
    CHECK(cudaEventDestroy(eb));
    CHECK(cudaStreamDestroy(sa));
    CHECK(cudaStreamDestroy(sb));
    CHECK(cudaFree(d));
}

/* ------------------------------------------------------------ device, errors */

static void test_device(void **state)
{
    (void)state;
    int n = 0, v = 0;
    CHECK(cudaGetDeviceCount(&n));
    assert_int_equal(n, 8);
    CHECK(cudaSetDevice(7));
    CHECK(cudaGetDevice(&v));
    assert_int_equal(v, 7);
    assert_int_equal(cudaSetDevice(8), cudaErrorInvalidDevice);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    CHECK(cudaSetDevice(0));
    struct cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    assert_int_equal(p.major, 8);
    assert_int_equal(p.multiProcessorCount, 108);
    assert_int_equal(p.sharedMemPerBlockOptin, 166912);
    assert_int_equal(p.sharedMemPerBlock, 49152);
    assert_int_equal(p.maxGridSize[0], 2147483647);
    assert_int_equal(p.maxThreadsDim[2], 64);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    assert_int_equal(v, 166912);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0));
    assert_int_equal(v, 1);
    CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 0));
    assert_int_equal(v, 32);

    static const char kernel_a = 0, kernel_b = 0; /* stand-ins for kernel addresses */
    assert_int_equal(cudaemu_func_smem_limit(&kernel_a), 48 << 10);
    CHECK(cudaFuncSetAttribute(&kernel_a, cudaFuncAttributeMaxDynamicSharedMemorySize, 166912));
    assert_int_equal(cudaemu_func_smem_limit(&kernel_a), 166912);
    assert_int_equal(cudaFuncSetAttribute(&kernel_b, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          166913),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaemu_func_smem_limit(&kernel_b), 48 << 10);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);

    assert_string_equal(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
    assert_string_equal(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    assert_string_equal(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
}

/* Run with CUDAEMU_DEVICE=h100 CUDAEMU_DEVICES=2 CUDAEMU_REPORT=1 (a fresh process: the
 * environment is read once): the H100's figures and limits, and the exit report. */
static int h100_main(void)
{
    int n = 0, v = 0;
    struct cudaDeviceProp p;
    static const char kernel = 0;
    void *d = NULL;
    int ok = cudaGetDeviceCount(&n) == cudaSuccess && n == 2 &&
             cudaSetDevice(2) == cudaErrorInvalidDevice &&
             cudaGetDeviceProperties(&p, 1) == cudaSuccess && p.major == 9 && p.minor == 0 &&
             p.multiProcessorCount == 132 && p.sharedMemPerBlockOptin == 232448 &&
             cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess &&
             v == 232448 && cudaemu_smem_optin_max() == 232448 &&
             cudaFuncSetAttribute(&kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448) ==
                 cudaSuccess &&
             cudaFuncSetAttribute(&kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 232449) ==
                 cudaErrorInvalidValue &&
             cudaemu_func_smem_limit(&kernel) == 232448 && cudaMalloc(&d, 5000) == cudaSuccess;
    return ok ? 0 : 1; /* d stays live: the report counts it */
}

static void run_h100(void *arg)
{
    (void)arg;
    setenv("CUDAEMU_DEVICE", "h100", 1);
    setenv("CUDAEMU_DEVICES", "2", 1);
    setenv("CUDAEMU_REPORT", "1", 1);
    execl("/proc/self/exe", g_self, "--h100", (char *)NULL);
    _exit(99);
}

static void test_h100_and_report(void **state)
{
    (void)state;
    child_result r = run_in_child(run_h100, NULL);
    if (r.exit_code != 0)
        fprintf(stderr, "%s\n", r.err);
    assert_int_equal(r.exit_code, 0);
    assert_non_null(strstr(r.err, "cudaemu: device memory: peak 5000 bytes"));
    assert_non_null(strstr(r.err, "5000 bytes in 1 allocations still live at exit"));
    assert_non_null(strstr(r.err, "cudaemu: host waits for the device: "));
    free(r.err);
}

static void sticky_error(void *arg)
{
    (void)arg;
    void *d = NULL;
    cudaemu_set_last_error(cudaErrorIllegalAddress);
    int ok = cudaGetLastError() == cudaErrorIllegalAddress &&
             cudaGetLastError() == cudaErrorIllegalAddress && /* not reset */
             cudaMalloc(&d, 16) == cudaErrorIllegalAddress &&
             cudaDeviceSynchronize() == cudaErrorIllegalAddress;
    _exit(ok ? 0 : 1);
}

static void test_sticky_error(void **state)
{
    (void)state;
    cudaemu_set_last_error(cudaErrorInvalidConfiguration); /* a launch error: not sticky */
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    child_result r = run_in_child(sticky_error, NULL);
    assert_int_equal(r.exit_code, 0);
    free(r.err);
}

int main(int argc, char **argv)
{
    g_self = argv[0];
    if (argc > 1 && strcmp(argv[1], "--stale-read") == 0)
        return stale_read_main();
    if (argc > 1 && strcmp(argv[1], "--h100") == 0)
        return h100_main();
    unsetenv("CUDAEMU_DEVICES");
    unsetenv("CUDAEMU_DEVICE");
    unsetenv("CUDAEMU_RACECHECK");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poison_visible),
        cmocka_unit_test(test_find_alloc_boundaries),
        cmocka_unit_test(test_bad_frees_and_ranges),
        cmocka_unit_test(test_memcpy_kinds),
        cmocka_unit_test(test_memcpy_findings),
        cmocka_unit_test(test_peak_accounting),
        cmocka_unit_test(test_laziness),
        cmocka_unit_test(test_event_ordering),
        cmocka_unit_test(test_missing_wait),
        cmocka_unit_test(test_free_async),
        cmocka_unit_test(test_legacy_stream),
        cmocka_unit_test(test_stream_priorities),
        cmocka_unit_test(test_many_ops),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_sticky_error),
        cmocka_unit_test(test_h100_and_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
