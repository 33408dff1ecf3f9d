/* The harness's kernel semantics, checked with small kernels of known results:
 * barriers and block reductions at every block size, every shuffle flavour and width
 * against its definition, votes, launch limits, dynamic shared memory poisoning and
 * opt-in, and every finding (divergent barrier, deadlock, exited or foreign lanes,
 * mismatched masks, non-device pointers), each in a child process that must abort with
 * the expected message. Last, removed barriers: each is caught by at least one of the
 * four thread orders that CI runs.
 *
 * Built like the kernels (host compiler, cudaemu_device.h force-included). Prints one
 * line per check and exits non-zero on the first failure. */
#include "cuda_common.cuh"
#include "emu_kernel_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        printf("FAIL cudaMalloc(%zu)\n", bytes);
        exit(1);
    }
    return p;
}

/* Device memory is host memory under the harness, but the test still moves data the
 * CUDA way so that it stays a valid CUDA program. */
static void to_host(void *dst, const void *src, size_t bytes)
{
    if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("FAIL cudaMemcpy D2H\n");
        exit(1);
    }
}

/* ---------------------------------------------------------------- kernels */

__global__ void block_sum_kernel(double *out, int rounds)
{
    __shared__ double red[32];
    double total = 0.0;
    for (int r = 0; r < rounds; r++)
        total += ft_block_sum((double)(threadIdx.x + 1 + r), red);
    out[threadIdx.x] = total;
}

__global__ void shuffle_kernel(int *out, int kind, int arg, int width)
{
    int lane = threadIdx.x % 32;
    int v = 1000 + lane;
    int r = 0;
    switch (kind) {
    case 0:
        r = __shfl_sync(FT_FULL_MASK, v, arg, width);
        break;
    case 1:
        r = __shfl_up_sync(FT_FULL_MASK, v, (unsigned)arg, width);
        break;
    case 2:
        r = __shfl_down_sync(FT_FULL_MASK, v, (unsigned)arg, width);
        break;
    default:
        r = __shfl_xor_sync(FT_FULL_MASK, v, arg, width);
        break;
    }
    out[threadIdx.x] = r;
}

__global__ void vote_kernel(unsigned *out)
{
    int lane = threadIdx.x % 32;
    unsigned b = __ballot_sync(FT_FULL_MASK, lane % 3 == 0);
    int any = __any_sync(FT_FULL_MASK, lane == 7);
    int all = __all_sync(FT_FULL_MASK, lane < 40);
    int none = __any_sync(FT_FULL_MASK, 0);
    out[threadIdx.x * 4 + 0] = b;
    out[threadIdx.x * 4 + 1] = (unsigned)any;
    out[threadIdx.x * 4 + 2] = (unsigned)all;
    out[threadIdx.x * 4 + 3] = (unsigned)none;
}

__global__ void coords_kernel(unsigned *out)
{
    unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
    out[block * per_block + thread] = block * 100000u + thread;
}

__global__ void smem_read_kernel(float *out, int n)
{
    FT_DYNAMIC_SMEM(float, smem);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = smem[i];
}

__global__ void smem_big_kernel(float *out, int n)
{
    FT_DYNAMIC_SMEM(float, smem);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        smem[i] = (float)i;
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = smem[n - 1];
}

/* Findings, selected by `which`. */
__global__ void defect_kernel(int *out, int which)
{
    __shared__ int s[64];
    int lane = threadIdx.x % 32;
    switch (which) {
    case 0: /* divergent barrier */
        if (threadIdx.x < 16)
            __syncthreads();
        else
            __syncthreads();
        break;
    case 1: /* a warp collective whose mask names lanes that wait at a barrier */
        if (threadIdx.x < 48)
            __syncthreads();
        else
            out[0] = __shfl_sync(FT_FULL_MASK, 1, 0);
        break;
    case 2: /* shuffle whose mask names exited lanes */
        if (lane >= 16)
            return;
        out[lane] = __shfl_xor_sync(FT_FULL_MASK, lane, 1);
        break;
    case 3: /* mismatched masks */
        out[lane] = __shfl_xor_sync(lane == 5 ? 0x3fu : FT_FULL_MASK, lane, 1);
        break;
    case 4: /* shuffle reading a lane outside its mask */
        if (lane < 16)
            out[lane] = __shfl_sync(0xffffu, lane, 20);
        break;
    case 5: /* the caller is not in its own mask */
        out[lane] = __shfl_sync(0x1u, lane, 0);
        break;
    case 6: /* __syncwarp with a lane that went to a block barrier instead */
        s[threadIdx.x] = 1;
        out[threadIdx.x] = s[threadIdx.x];
        if (threadIdx.x == 0)
            __syncwarp(0x3u);
        else
            __syncthreads();
        break;
    default:
        break;
    }
}

__global__ void use_pointer_kernel(float *p)
{
    p[threadIdx.x] = 1.0f;
}

/* Removed barriers. Each variant exchanges data through shared memory; `barrier` = 0
 * removes the barrier that orders the writes before the reads. out = what each thread
 * read; the right answer is known. `salt` differs from launch to launch, so a value left
 * in (static, hence not poisoned) shared memory by an earlier launch is wrong too. */
__global__ void exchange_kernel(float *out, int variant, int barrier, float salt)
{
    __shared__ float s[256];
    __shared__ double red[32];
    int t = threadIdx.x, n = blockDim.x;
    switch (variant) {
    case 0: /* neighbour in the next warp */
        s[t] = (float)t + salt;
        if (barrier)
            __syncthreads();
        out[t] = s[(t + 32) % n];
        break;
    case 1: /* neighbour in the previous warp */
        s[t] = (float)t + salt;
        if (barrier)
            __syncthreads();
        out[t] = s[(t + n - 32) % n];
        break;
    case 2: /* neighbour in the same warp */
        s[t] = (float)t + salt;
        if (barrier)
            __syncwarp();
        out[t] = s[t ^ 1];
        break;
    case 3: /* a value written by thread 0 only */
        if (t == 0)
            s[0] = 42.0f + salt;
        if (barrier)
            __syncthreads();
        out[t] = s[0];
        break;
    case 4: { /* two block sums in a row; the second overwrites `red` early */
        double a = 0, b = 0;
        int lane = t % 32, warp = t / 32;
        a = ft_warp_sum((double)t + salt);
        if (lane == 0)
            red[warp] = a;
        __syncthreads();
        a = ft_warp_sum(lane < n / 32 ? red[lane] : 0.0);
        if (barrier)
            __syncthreads();
        b = ft_warp_sum((double)(2 * t));
        if (lane == 0)
            red[warp] = b;
        __syncthreads();
        b = ft_warp_sum(lane < n / 32 ? red[lane] : 0.0);
        out[t] = (float)(a + b);
        break;
    }
    case 5: /* reduce in place, tree of halves */
        s[t] = 1.0f + salt;
        if (barrier)
            __syncthreads();
        for (int h = n / 2; h > 0; h /= 2) {
            if (t < h)
                s[t] += s[t + h];
            __syncthreads();
        }
        out[t] = s[0];
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- checks */

static void test_block_sum(void)
{
    const int sizes[] = {32, 64, 96, 128, 256, 512, 1024};
    double *d = (double *)dev_alloc(1024 * sizeof(double));
    double h[1024];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int n = sizes[i];
        FT_LAUNCH(block_sum_kernel, 1, n, 0, (cudaStream_t)0)(d, 3);
        CHECK(cudaGetLastError() == cudaSuccess, "launch %d", n);
        to_host(h, d, (size_t)n * sizeof(double));
        double want = 0;
        for (int r = 0; r < 3; r++)
            want += (double)n * (n + 1) / 2 + (double)n * r;
        for (int t = 0; t < n; t++)
            CHECK(h[t] == want, "block sum n=%d thread %d: %g, want %g", n, t, h[t], want);
    }
    cudaFree(d);
}

static void test_shuffles(void)
{
    int *d = (int *)dev_alloc(64 * sizeof(int));
    int h[64];
    const int widths[] = {32, 16, 8, 4, 2, 1};
    for (int kind = 0; kind < 4; kind++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int arg = 0; arg < 33; arg += (arg < 4 ? 1 : 7)) {
                int w = widths[wi];
                FT_LAUNCH(shuffle_kernel, 1, 64, 0, (cudaStream_t)0)(d, kind, arg, w);
                to_host(h, d, sizeof h);
                for (int t = 0; t < 64; t++) {
                    int lane = t % 32, base = lane / w * w, src = lane;
                    if (kind == 0)
                        src = base + arg % w;
                    else if (kind == 1)
                        src = lane - arg >= base ? lane - arg : lane;
                    else if (kind == 2)
                        src = lane + arg < base + w ? lane + arg : lane;
                    else
                        src = (lane ^ arg) < base + w ? (lane ^ arg) : lane;
                    CHECK(h[t] == 1000 + src, "shuffle kind %d width %d arg %d thread %d: %d, "
                          "want %d", kind, w, arg, t, h[t], 1000 + src);
                }
            }
    unsigned *v = (unsigned *)dev_alloc(64 * 4 * sizeof(unsigned));
    unsigned hv[64 * 4];
    FT_LAUNCH(vote_kernel, 1, 64, 0, (cudaStream_t)0)(v);
    to_host(hv, v, sizeof hv);
    for (int t = 0; t < 64; t++) {
        CHECK(hv[4 * t] == 0x49249249u, "ballot %08x", hv[4 * t]);
        CHECK(hv[4 * t + 1] == 1 && hv[4 * t + 2] == 1 && hv[4 * t + 3] == 0, "any/all");
    }
    cudaFree(v);
    cudaFree(d);
}

static void test_coordinates(void)
{
    dim3 grid(3, 2, 2), block(4, 3, 2);
    unsigned n = 12 * 24;
    unsigned *d = (unsigned *)dev_alloc(n * sizeof(unsigned));
    unsigned *h = (unsigned *)malloc(n * sizeof(unsigned));
    FT_LAUNCH(coords_kernel, grid, block, 0, (cudaStream_t)0)(d);
    to_host(h, d, n * sizeof(unsigned));
    for (unsigned b = 0; b < 12; b++)
        for (unsigned t = 0; t < 24; t++)
            CHECK(h[b * 24 + t] == b * 100000u + t, "coords block %u thread %u: %u", b, t,
                  h[b * 24 + t]);
    free(h);
    cudaFree(d);
}

static void test_launch_limits(void)
{
    float *d = (float *)dev_alloc(65536 * sizeof(float));
    struct {
        dim3 grid, block;
        size_t smem;
        cudaError_t want;
    } cases[] = {
        {dim3(1), dim3(1024), 0, cudaSuccess},
        {dim3(1), dim3(1025), 0, cudaErrorInvalidConfiguration},
        {dim3(1), dim3(32, 32, 2), 0, cudaErrorInvalidConfiguration},
        {dim3(1), dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration},
        {dim3(1, 65536), dim3(32), 0, cudaErrorInvalidConfiguration},
        {dim3(0), dim3(32), 0, cudaErrorInvalidConfiguration},
        {dim3(1), dim3(32), 48 << 10, cudaSuccess},
        {dim3(1), dim3(32), (48 << 10) + 4, cudaErrorInvalidValue},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FT_LAUNCH(smem_read_kernel, cases[i].grid, cases[i].block, cases[i].smem,
                  (cudaStream_t)0)(d, 0);
        cudaError_t e = cudaGetLastError();
        CHECK(e == cases[i].want, "launch case %zu: %s, want %s", i, cudaGetErrorName(e),
              cudaGetErrorName(cases[i].want));
    }
    CHECK(cudaGetLastError() == cudaSuccess, "launch errors are not sticky");

    /* Over 48 KiB needs the opt-in; the opt-in is capped by the device. */
    size_t big = 100 << 10;
    int n = (int)(big / sizeof(float));
    FT_LAUNCH(smem_big_kernel, 1, 256, big, (cudaStream_t)0)(d, n);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "100 KiB without opt-in must fail");
    CHECK(cudaFuncSetAttribute(smem_big_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)big) == cudaSuccess, "opt-in 100 KiB");
    FT_LAUNCH(smem_big_kernel, 1, 256, big, (cudaStream_t)0)(d, n);
    CHECK(cudaGetLastError() == cudaSuccess, "100 KiB with opt-in");
    float h;
    to_host(&h, d, sizeof h);
    CHECK(h == (float)(n - 1), "opt-in smem contents %g", h);
    size_t over = cudaemu_smem_optin_max() + 1024;
    CHECK(cudaFuncSetAttribute(smem_big_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)over) != cudaSuccess, "opt-in above the device maximum");
    (void)cudaGetLastError();
    cudaFree(d);
}

static void test_smem_poison(void)
{
    float *d = (float *)dev_alloc(1024 * sizeof(float));
    float h[1024];
    FT_LAUNCH(smem_read_kernel, 1, 128, 1024 * sizeof(float), (cudaStream_t)0)(d, 1024);
    to_host(h, d, sizeof h);
    int nan = 0;
    for (int i = 0; i < 1024; i++)
        nan += h[i] != h[i];
    CHECK(nan == 1024, "unwritten dynamic shared memory reads as NaN: %d of 1024", nan);
    cudaFree(d);
}


static void run_defect(int which)
{
    int *d = (int *)dev_alloc(64 * sizeof(int));
    FT_LAUNCH(defect_kernel, 1, 64, 0, (cudaStream_t)0)(d, which);
    cudaDeviceSynchronize();
}

static void run_host_pointer(int unused)
{
    static float host[64];
    FT_LAUNCH(use_pointer_kernel, 1, 32, 0, (cudaStream_t)0)(host);
    cudaDeviceSynchronize();
}

static void run_freed_pointer(int unused)
{
    float *d = (float *)dev_alloc(64 * sizeof(float));
    cudaFree(d);
    FT_LAUNCH(use_pointer_kernel, 1, 32, 0, (cudaStream_t)0)(d);
    cudaDeviceSynchronize();
}

static void test_findings(void)
{
    expect_finding("divergent barrier", run_defect, 0, "divergent __syncthreads");
    expect_finding("barrier against warp collective", run_defect, 1, "deadlock");
    expect_finding("shuffle naming exited lanes", run_defect, 2, "exited");
    expect_finding("mismatched masks", run_defect, 3, "same collective with the same mask");
    expect_finding("shuffle outside its mask", run_defect, 4, "which is not in the mask");
    expect_finding("caller outside its mask", run_defect, 5, "does not contain the lane itself");
    expect_finding("barrier never reached", run_defect, 6, "deadlock");
    expect_finding("host pointer argument", run_host_pointer, 0, "not in a live device allocation");
    expect_finding("freed pointer argument", run_freed_pointer, 0,
                   "not in a live device allocation");
}

static const char *const orders[] = {"forward", "reverse", "random", "warp-serial"};

/* Each removed barrier must give a wrong result in at least one order; with the barrier,
 * every order gives the right one. */
static void test_removed_barriers(void)
{
    const int n = 128;
    float *d = (float *)dev_alloc(n * sizeof(float));
    float h[128];
    int launch = 0;
    for (int variant = 0; variant < 6; variant++) {
        int caught_by = 0;
        for (int o = 0; o < 4; o++) {
            cudaemu_set_thread_order(orders[o]);
            for (int barrier = 1; barrier >= 0; barrier--) {
                float salt = (float)(++launch * 1000);
                FT_LAUNCH(exchange_kernel, 1, n, 0, (cudaStream_t)0)(d, variant, barrier, salt);
                to_host(h, d, sizeof h);
                int wrong = 0;
                for (int t = 0; t < n; t++) {
                    float want = variant == 0   ? (float)((t + 32) % n) + salt
                                 : variant == 1 ? (float)((t + n - 32) % n) + salt
                                 : variant == 2 ? (float)(t ^ 1) + salt
                                 : variant == 3 ? 42.0f + salt
                                 : variant == 4 ? (float)(3.0 * n * (n - 1) / 2 + n * salt)
                                                : (float)n * (1.0f + salt);
                    wrong += !(h[t] == want);
                }
                if (barrier)
                    CHECK(wrong == 0, "variant %d order %s: wrong with the barrier", variant,
                          orders[o]);
                else if (wrong)
                    caught_by |= 1 << o;
            }
        }
        CHECK(caught_by != 0, "removed barrier in variant %d is caught by no order", variant);
        printf("ok   removed barrier %d caught by:%s%s%s%s\n", variant,
               caught_by & 1 ? " forward" : "", caught_by & 2 ? " reverse" : "",
               caught_by & 4 ? " random" : "", caught_by & 8 ? " warp-serial" : "");
    }
    const char *env = getenv("CUDAEMU_ORDER");
    cudaemu_set_thread_order(env && *env ? env : "forward");
    cudaFree(d);
}

int main(void)
{
    test_block_sum();
    test_shuffles();
    test_coordinates();
    test_launch_limits();
    test_smem_poison();
    test_findings();
    test_removed_barriers();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
