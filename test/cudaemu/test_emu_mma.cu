/* The harness's tensor-core instructions against their definitions:
 *  - mma.m16n8k16 (bf16, fp32 accumulate) with fragments built element by element from
 *    the ISA's table, against a double-precision matmul, C aliased with D too;
 *  - ldmatrix x1/x2/x4, plain and .trans, against the ISA's element mapping;
 *  - the chain the kernels use, ldmatrix.x4 (A, row-major) + ldmatrix.x2 (B^T rows) or
 *    ldmatrix.x2.trans (B rows) + mma, against the plain matmul: three separate
 *    statements of the layouts must agree for it to pass;
 *  - cp.async: lands at its wait, not before; wait_group N keeps the N newest groups in
 *    flight; src-size zero fill;
 *  - cvt.rn.bf16x2.f32: the first source in the upper half, round to nearest even (ties
 *    to the even neighbour), infinities, overflow to infinity, NaN quiet, as
 *    util/bf16.h's rounding, the CPU backend's;
 *  - findings: a half-warp mma, misaligned ldmatrix rows, cp.async from host memory or
 *    into global memory. */
#include "cuda_common.cuh"
#include "emu_kernel_test.h"
#include "cuda_mma.cuh"
#include "util/bf16.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng = 0x243F6A8885A308D3ull;
static float rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) % 2001) / 1000.0f - 1.0f;
}

static void *dev(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        exit(1);
    return p;
}
static void up(void *d, const void *h, size_t n) { cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); }
static void down(void *h, const void *d, size_t n) { cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost); }

static uint32_t pack(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

/* ---------------------------------------------------------------- kernels */

/* A [16][16], B [16][8] (k x n), C, D [16][8]: fragments straight from the ISA table. */
__global__ void mma_table_kernel(float *D, const uint16_t *A, const uint16_t *B, const float *C,
                                 int alias)
{
    int l = threadIdx.x, g = l / 4, t = l % 4;
    uint32_t a[4] = {pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                     pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                     pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                     pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    uint32_t b[2] = {pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                     pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                  C[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    if (alias) {
        ft_mma_m16n8k16_bf16(c, a, b, c);
        for (int i = 0; i < 4; i++)
            d[i] = c[i];
    } else {
        ft_mma_m16n8k16_bf16(d, a, b, c);
    }
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

/* The kernels' chain: A row-major and B (k x n) row-major in shared memory, via ldmatrix;
 * Bt (n x k) too, for the non-transposed load. */
__global__ void mma_ldmatrix_kernel(float *D, const uint16_t *A, const uint16_t *B, const float *C,
                                    int b_transposed_load)
{
    __shared__ __align__(16) uint16_t As[16 * 16];
    __shared__ __align__(16) uint16_t Bs[16 * 8];  /* k x n */
    __shared__ __align__(16) uint16_t Bts[8 * 16]; /* n x k */
    int l = threadIdx.x, g = l / 4, t = l % 4;
    for (int i = l; i < 256; i += 32)
        As[i] = A[i];
    for (int i = l; i < 128; i += 32) {
        Bs[i] = B[i];
        Bts[(i % 8) * 16 + i / 8] = B[i];
    }
    __syncwarp();
    uint32_t a[4], b[2];
    ft_ldmatrix<4, false>(a, &As[(l % 16) * 16 + 8 * (l / 16)]);
    if (b_transposed_load)
        ft_ldmatrix<2, true>(b, &Bs[(l % 16) * 8]);        /* lanes 0-15: rows k = 0..15 */
    else
        ft_ldmatrix<2, false>(b, &Bts[(l % 8) * 16 + 8 * ((l / 8) % 2)]);
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t],
                  C[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    ft_mma_m16n8k16_bf16(d, a, b, c);
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

/* M: 4 matrices of 8x8 stored one after another; out[lane][i] = r[i]. */
__global__ void ldmatrix_kernel(uint32_t *out, const uint16_t *M, int count, int trans)
{
    __shared__ __align__(16) uint16_t Ms[4 * 64];
    int l = threadIdx.x;
    for (int i = l; i < 256; i += 32)
        Ms[i] = M[i];
    __syncwarp();
    uint32_t r[4] = {0, 0, 0, 0};
    const void *row = &Ms[(l / 8) * 64 + (l % 8) * 8];
    if (count == 1 && !trans)
        ft_ldmatrix<1, false>(r, row);
    else if (count == 1)
        ft_ldmatrix<1, true>(r, row);
    else if (count == 2 && !trans)
        ft_ldmatrix<2, false>(r, row);
    else if (count == 2)
        ft_ldmatrix<2, true>(r, row);
    else if (!trans)
        ft_ldmatrix<4, false>(r, row);
    else
        ft_ldmatrix<4, true>(r, row);
    for (int i = 0; i < 4; i++)
        out[l * 4 + i] = r[i];
}

/* Each thread copies 16 bytes in group 0 and 16 in group 1; out records what it saw
 * before any wait, after wait<1> and after wait<0>. */
__global__ void cp_async_kernel(float *out, const float *src, int zfill)
{
    __shared__ __align__(16) float s[2][32 * 4];
    int l = threadIdx.x;
    for (int i = 0; i < 4; i++) {
        s[0][l * 4 + i] = -1.0f;
        s[1][l * 4 + i] = -1.0f;
    }
    ft_cp_async_16(&s[0][l * 4], &src[l * 4]);
    ft_cp_async_commit();
    ft_cp_async_16(&s[1][l * 4], &src[128 + l * 4], zfill ? 8 : 16);
    ft_cp_async_commit();
    out[l] = s[0][l * 4];               /* before: -1 */
    ft_cp_async_wait<1>();
    out[32 + l] = s[0][l * 4];          /* group 0 landed */
    out[64 + l] = s[1][l * 4 + 3];      /* group 1 not yet: -1 */
    ft_cp_async_wait<0>();
    out[96 + l] = s[1][l * 4 + 3];      /* landed, or zero-filled */
}

__global__ void defect_kernel(const uint16_t *g16, const float *gf, float *out, int which)
{
    __shared__ __align__(16) uint16_t sm[256];
    __shared__ __align__(16) float sf[64];
    int l = threadIdx.x;
    uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4] = {0, 0, 0, 0}, d[4] = {0, 0, 0, 0};
    switch (which) {
    case 0: /* half the warp has exited */
        if (l >= 16)
            return;
        ft_mma_m16n8k16_bf16(d, a, b, c);
        break;
    case 1: /* misaligned ldmatrix row */
        ft_ldmatrix<1, false>(a, &sm[l * 8 + 1]);
        break;
    case 2: /* ldmatrix from global memory */
        ft_ldmatrix<1, false>(a, &g16[(l % 8) * 8]);
        break;
    case 3: /* cp.async into global memory */
        ft_cp_async_16(out + 4 * l, gf + 4 * l);
        break;
    case 4: { /* cp.async from host memory */
        static float host[128];
        ft_cp_async_16(&sf[(l % 16) * 4], &host[(l % 16) * 4]);
        break;
    }
    default:
        break;
    }
    out[0] = d[0] + (float)a[0] + sf[0];
}

/* ---------------------------------------------------------------- checks */

static void reference(float *D, const uint16_t *A, const uint16_t *B, const float *C)
{
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            double s = C[i * 8 + j];
            for (int k = 0; k < 16; k++)
                s += (double)ft_bf16_to_f32(A[i * 16 + k]) * (double)ft_bf16_to_f32(B[k * 8 + j]);
            D[i * 8 + j] = (float)s;
        }
}

static void test_mma(void)
{
    uint16_t A[256], B[128];
    float C[128], want[128], got[128];
    for (int trial = 0; trial < 4; trial++) {
        for (int i = 0; i < 256; i++)
            A[i] = ft_f32_to_bf16(rnd() * (trial + 1));
        for (int i = 0; i < 128; i++) {
            B[i] = ft_f32_to_bf16(rnd());
            C[i] = trial == 0 ? 0.0f : rnd();
        }
        reference(want, A, B, C);
        uint16_t *dA = (uint16_t *)dev(sizeof A), *dB = (uint16_t *)dev(sizeof B);
        float *dC = (float *)dev(sizeof C), *dD = (float *)dev(sizeof got);
        up(dA, A, sizeof A);
        up(dB, B, sizeof B);
        up(dC, C, sizeof C);
        const char *names[] = {"table fragments", "table fragments, D aliasing C",
                               "ldmatrix.x4 A + ldmatrix.x2 B^T", "ldmatrix.x4 A + ldmatrix.x2.trans B"};
        for (int v = 0; v < 4; v++) {
            if (v < 2)
                FT_LAUNCH(mma_table_kernel, 1, 32, 0, (cudaStream_t)0)(dD, dA, dB, dC, v);
            else
                FT_LAUNCH(mma_ldmatrix_kernel, 1, 32, 0, (cudaStream_t)0)(dD, dA, dB, dC, v - 2);
            down(got, dD, sizeof got);
            int bad = 0;
            for (int i = 0; i < 128; i++)
                bad += fabsf(got[i] - want[i]) > 1e-6f * (1.0f + fabsf(want[i]));
            CHECK(bad == 0, "mma (%s), trial %d: %d of 128 elements differ from the matmul",
                  names[v], trial, bad);
        }
        cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
    }
    printf("ok   mma.m16n8k16 bf16: table fragments and ldmatrix chains equal the matmul\n");
}

static void test_ldmatrix(void)
{
    uint16_t M[256];
    for (int i = 0; i < 256; i++)
        M[i] = (uint16_t)(i * 7 + 3);
    uint16_t *dM = (uint16_t *)dev(sizeof M);
    uint32_t *dout = (uint32_t *)dev(32 * 4 * 4), out[128];
    up(dM, M, sizeof M);
    for (int count = 1; count <= 4; count *= 2)
        for (int trans = 0; trans < 2; trans++) {
            FT_LAUNCH(ldmatrix_kernel, 1, 32, 0, (cudaStream_t)0)(dout, dM, count, trans);
            down(out, dout, sizeof out);
            int bad = 0;
            for (int l = 0; l < 32; l++)
                for (int i = 0; i < count; i++) {
                    int row = l / 4, col = 2 * (l % 4);
                    const uint16_t *m = &M[i * 64];
                    uint32_t want = trans ? pack(m[col * 8 + row], m[(col + 1) * 8 + row])
                                          : pack(m[row * 8 + col], m[row * 8 + col + 1]);
                    bad += out[l * 4 + i] != want;
                }
            CHECK(bad == 0, "ldmatrix x%d%s: %d registers differ from the ISA mapping", count,
                  trans ? ".trans" : "", bad);
        }
    cudaFree(dM), cudaFree(dout);
    printf("ok   ldmatrix x1/x2/x4, plain and .trans, follow the ISA mapping\n");
}

static void test_cp_async(void)
{
    float src[256], out[128];
    for (int i = 0; i < 256; i++)
        src[i] = (float)(i + 1);
    float *dsrc = (float *)dev(sizeof src), *dout = (float *)dev(sizeof out);
    up(dsrc, src, sizeof src);
    for (int zfill = 0; zfill < 2; zfill++) {
        FT_LAUNCH(cp_async_kernel, 1, 32, 0, (cudaStream_t)0)(dout, dsrc, zfill);
        down(out, dout, sizeof out);
        int bad = 0;
        for (int l = 0; l < 32; l++) {
            bad += out[l] != -1.0f;
            bad += out[32 + l] != src[l * 4];
            bad += out[64 + l] != -1.0f;
            bad += out[96 + l] != (zfill ? 0.0f : src[128 + l * 4 + 3]);
        }
        CHECK(bad == 0, "cp.async groups%s: %d values wrong", zfill ? " with zero fill" : "", bad);
    }
    cudaFree(dsrc), cudaFree(dout);
    printf("ok   cp.async lands at its wait_group; src-size zero fill\n");
}

__global__ void cvt_kernel(uint32_t *out, const float *a, const float *b, int n)
{
    int i = threadIdx.x;
    if (i < n)
        out[i] = ft_cvt_rn_bf16x2(a[i], b[i]);
}

static void test_cvt_bf16x2(void)
{
    /* ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (to the even: 1), 1 + 3 2^-8
     * between 1 + 2^-7 and 1 + 2^-6 (to the even: 1 + 2^-6); the largest finite fp32
     * rounds past bf16's largest finite value */
    const float a[] = {1.0f, 1.00390625f, 1.01171875f, -2.5f, INFINITY, 3.4028235e38f, NAN,
                       1e-40f, -0.0f, 0.333333343f};
    const int n = (int)(sizeof a / sizeof a[0]);
    float b[sizeof a / sizeof a[0]];
    for (int i = 0; i < n; i++)
        b[i] = -a[n - 1 - i];
    float *da = (float *)dev(sizeof a), *db = (float *)dev(sizeof b);
    uint32_t *dout = (uint32_t *)dev((size_t)n * 4), out[sizeof a / sizeof a[0]];
    up(da, a, sizeof a);
    up(db, b, sizeof b);
    FT_LAUNCH(cvt_kernel, 1, 32, 0, (cudaStream_t)0)(dout, da, db, n);
    down(out, dout, sizeof out);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t want = ((uint32_t)ft_f32_to_bf16(a[i]) << 16) | ft_f32_to_bf16(b[i]);
        bool nan_hi = isnan(a[i]), nan_lo = isnan(b[i]);
        uint32_t mask = (nan_hi ? 0u : 0xffff0000u) | (nan_lo ? 0u : 0xffffu);
        bad += (out[i] & mask) != (want & mask);
        bad += nan_hi && !isnan(__uint_as_float(out[i] & 0xffff0000u));
        bad += nan_lo && !isnan(__uint_as_float(out[i] << 16));
    }
    CHECK(out[0] == 0x3f80beabu, "cvt.rn.bf16x2.f32(1, -1/3): 0x%08x, want 0x3f80beab", out[0]);
    CHECK(out[1] == 0x3f800000u, "cvt.rn.bf16x2.f32(1 + 2^-8, -0): 0x%08x, want 0x3f800000",
          out[1]);
    CHECK(out[2] >> 16 == 0x3f82u, "cvt.rn.bf16x2.f32(1 + 3 2^-8, ...) upper 0x%04x, want 0x3f82",
          out[2] >> 16);
    CHECK(bad == 0, "cvt.rn.bf16x2.f32: %d halves differ from util/bf16.h's rounding", bad);
    cudaFree(da), cudaFree(db), cudaFree(dout);
    printf("ok   cvt.rn.bf16x2.f32: first source upper, rounded to nearest even\n");
}

static void run_defect(int which)
{
    uint16_t *g16 = (uint16_t *)dev(512);
    float *gf = (float *)dev(1024), *out = (float *)dev(1024);
    FT_LAUNCH(defect_kernel, 1, 32, 0, (cudaStream_t)0)(g16, gf, out, which);
    cudaDeviceSynchronize();
}

int main(void)
{
    test_mma();
    test_ldmatrix();
    test_cp_async();
    test_cvt_bf16x2();
    expect_finding("mma with half the warp exited", run_defect, 0, "exited");
    expect_finding("misaligned ldmatrix row", run_defect, 1, "not 16-byte aligned");
    expect_finding("ldmatrix from global memory", run_defect, 2, "is global memory");
    expect_finding("cp.async into global memory", run_defect, 3, "must be shared");
    expect_finding("cp.async from host memory", run_defect, 4, "cp.async");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
