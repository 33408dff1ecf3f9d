/* The harness's warpgroup MMA (cuda/cuda_wgmma.cuh) against the PTX ISA's definitions:
 *  - shared tiles built element by element from the ISA's table of canonical layouts
 *    (written here as its CuTe shapes and strides, evaluated generically, then
 *    Swizzle<S,4,3> on the byte address), in all four swizzle modes, A K-major from shared
 *    memory or from registers (the fragment table), B K-major or MN-major (trans-b),
 *    m64n64k16 and m64n128k16, one or two warpgroups, k steps chained into one
 *    accumulator (descriptors for later k slices at the slice's unswizzled offset, +32
 *    bytes in a 128-byte row), scale-d 0: bitwise equal to a matmul rounded as the harness
 *    defines it (fp64 sum of the accumulator and 16 products, rounded once per wgmma);
 *  - ft_swz128 and ft_wgmma_desc_sw128: a tile stored at ft_swz128's positions and read
 *    through the helper's descriptors is the matrix again (K-major and MN-major B);
 *  - ordering: results land at the covering wait_group, not before; wait_group 1 with
 *    two groups completes the older only; a tile loaded by cp.async and fenced;
 *  - findings: a missing wgmma.fence (first batch, and after a wait), an accumulator
 *    written before the wait, shared memory changed before the wait, exit with a wgmma
 *    pending (and one never committed), a descriptor past dynamic shared memory,
 *    base-offset bits, a 64-thread block, warps of a warpgroup disagreeing or one
 *    skipping, a cp.async tile not fenced, a static
 *    __shared__ address. */
#include "cuda_common.cuh"
#include "emu_kernel_test.h"
#include "cuda_mma.cuh"
#include "cuda_wgmma.cuh"
#include "util/bf16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint16_t rnd_bf16(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ft_f32_to_bf16((float)((rng >> 11) % 2001) / 1000.0f - 1.0f);
}
static float bf(uint16_t x) { return ft_bf16_to_f32(x); }

static void *dev(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess)
        exit(1);
    return p;
}
static void *dev_copy(const void *h, size_t n)
{
    void *d = dev(n);
    cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
    return d;
}

/* ---------------------------------------------------------------- layouts (the ISA's table) */

enum { SW_NONE = 0, SW_128 = 1, SW_64 = 2, SW_32 = 3 }; /* the descriptor's bits 62-63 */
static int swizzle_bytes(int mode)
{
    return mode == SW_NONE ? 0 : mode == SW_128 ? 128 : mode == SW_64 ? 64 : 32;
}
static int swizzle_bits(int mode)
{
    return mode == SW_NONE ? 0 : mode == SW_128 ? 3 : mode == SW_64 ? 2 : 1;
}

/* One canonical layout, in bf16 elements (T = 8), L = LBO and S = SBO in elements: the
 * MN index's modes and K's, the last mode of each unbounded (the m or k repeats). */
struct canon {
    int mn_modes, mn_shape[3];
    long mn_stride[3];
    int k_shape;
    long k_stride[2];
};

static canon canonical(bool mn_major, int mode, long L, long S)
{
    int w = swizzle_bytes(mode);
    if (mn_major && mode == SW_NONE) /* ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO)) */
        return canon{3, {8, 1, 0}, {1, 8, S}, 8, {8, L}};
    if (mn_major) /* ((T,w/16,m),(8,k)) : ((1,T,LBO),(w/16 T,SBO)) */
        return canon{3, {8, w / 16, 0}, {1, 8, L}, 8, {w / 2, S}};
    if (mode == SW_NONE) /* ((8,m),(T,2k)) : ((1T,SBO),(1,LBO)) */
        return canon{2, {8, 0, 0}, {8, S, 0}, 8, {1, L}};
    /* ((8,m),(T,2k)) : ((w/16 T,SBO),(1,T)) */
    return canon{2, {8, 0, 0}, {w / 2, S, 0}, 8, {1, 8}};
}

/* CuTe's evaluation: the first mode varies fastest. */
static long eval_modes(int x, int modes, const int *shape, const long *stride)
{
    long off = 0;
    for (int i = 0; i < modes - 1; i++) {
        off += (long)(x % shape[i]) * stride[i];
        x /= shape[i];
    }
    return off + (long)x * stride[modes - 1];
}

/* Swizzle<B,4,3>: the bits [7, 7+B) of the byte offset XORed into bits [4, 4+B). */
static uint32_t swizzle(uint32_t x, int b)
{
    uint32_t yyy = ((1u << b) - 1u) << 7;
    return x ^ ((x & yyy) >> 3);
}

/* The byte offset of element (mn, k) before the swizzle. */
static uint32_t canon_offset(const canon &c, int mn, int k)
{
    return (uint32_t)(2 * (eval_modes(mn, c.mn_modes, c.mn_shape, c.mn_stride) +
                           eval_modes(k, 2, &c.k_shape, c.k_stride)));
}

/* An operand tile of rows (MN) x K in an image of shared memory whose origin lies on a
 * 1024-byte boundary: its offset there, layout, byte offsets, descriptor bits. */
struct tile {
    uint32_t off, bytes, lbo, sbo;
    int mode;
    bool mn_major;
    canon c;
};

static tile make_tile(uint32_t off, int rows, int K, bool mn_major, int mode, uint32_t lbo,
                      uint32_t sbo)
{
    tile t = {off, 0, lbo, sbo, mode, mn_major, canonical(mn_major, mode, lbo / 2, sbo / 2)};
    for (int mn = 0; mn < rows; mn++)
        for (int k = 0; k < K; k++) {
            uint32_t e = canon_offset(t.c, mn, k) + 2;
            t.bytes = e > t.bytes ? e : t.bytes;
        }
    t.bytes = (t.bytes + 1023) / 1024 * 1024;
    return t;
}

/* Stores M (rows x K, M[mn * K + k]) into the image; every byte at most once. */
static void store_tile(uint8_t *image, uint8_t *used, const tile &t, const uint16_t *M, int rows,
                       int K)
{
    for (int mn = 0; mn < rows; mn++)
        for (int k = 0; k < K; k++) {
            uint32_t a = t.off + swizzle(canon_offset(t.c, mn, k), swizzle_bits(t.mode));
            if (used[a] || used[a + 1]) {
                printf("FAIL: test layout overlaps itself at byte %u\n", a);
                exit(1);
            }
            used[a] = used[a + 1] = 1;
            memcpy(image + a, &M[mn * K + k], 2);
        }
}

/* The ISA's descriptor: start >> 4 in bits 0-13 (added in the kernel), LBO >> 4 in 16-29,
 * SBO >> 4 in 32-45, the swizzle mode in 62-63. */
static uint64_t desc_bits(const tile &t)
{
    return (uint64_t)(t.lbo >> 4) << 16 | (uint64_t)(t.sbo >> 4) << 32 | (uint64_t)t.mode << 62;
}

/* ---------------------------------------------------------------- kernels */

struct wg_case {
    int ksteps, scale_d, cp_async, fence_proxy;
    uint32_t a_off[2], b_off, a_step, b_step, image_bytes;
    uint64_t a_desc, b_desc; /* all but the start address */
};

__device__ uint32_t pack(uint16_t lo, uint16_t hi) { return (uint32_t)lo | ((uint32_t)hi << 16); }

/* Copies the image into 1024-byte-aligned dynamic shared memory (plain stores, or
 * cp.async with or without fence.proxy.async); returns its shared-window address. */
__device__ uint8_t *load_image(const uint8_t *image, const wg_case &c)
{
    FT_DYNAMIC_SMEM(uint8_t, smem);
    uint8_t *base = smem + ((1024u - (ft_smem_address(smem) & 1023u)) & 1023u);
    for (uint32_t i = 16 * threadIdx.x; i < c.image_bytes; i += 16 * blockDim.x)
        if (c.cp_async)
            ft_cp_async_16(base + i, image + i);
        else
            memcpy(base + i, image + i, 16);
    ft_cp_async_commit();
    ft_cp_async_wait<0>();
    if (c.fence_proxy)
        ft_fence_proxy_async();
    __syncthreads();
    return base;
}

/* Warp r's lane (g, t) holds D[16r + g (+8)][8i + 2t (+1)]: C in, D out (64 x N each). */
template <int N>
__device__ void load_d(float *d, const float *C)
{
    int r = (threadIdx.x / 32) % 4, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    for (int reg = 0; reg < N / 2; reg++)
        d[reg] = C[(16 * r + g + ((reg & 2) ? 8 : 0)) * N + 8 * (reg / 4) + 2 * t + (reg & 1)];
}
template <int N>
__device__ void store_d(float *D, const float *d)
{
    int r = (threadIdx.x / 32) % 4, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    for (int reg = 0; reg < N / 2; reg++)
        D[(16 * r + g + ((reg & 2) ? 8 : 0)) * N + 8 * (reg / 4) + 2 * t + (reg & 1)] = d[reg];
}

/* D = A B + C over k steps, one commit and one wait; warpgroup w uses A tile w, A[w], C[w]. */
template <int N, int A_REGS, int TRANS_B>
__global__ void wg_kernel(float *D, const uint8_t *image, const uint16_t *A, const float *C,
                          int K, wg_case c)
{
    uint8_t *base = load_image(image, c);
    int w = threadIdx.x / 128, r = (threadIdx.x / 32) % 4, l = threadIdx.x % 32, g = l / 4,
        t = l % 4;
    uint32_t sa = ft_smem_address(base);
    float d[N / 2];
    load_d<N>(d, C + w * 64 * N);
    ft_wgmma_fence();
    for (int s = 0; s < c.ksteps; s++) {
        uint64_t db = c.b_desc | ((sa + c.b_off + s * c.b_step) & 0x3FFFFu) >> 4;
        uint64_t da = c.a_desc | ((sa + c.a_off[w] + s * c.a_step) & 0x3FFFFu) >> 4;
        int scale = s == 0 ? c.scale_d : 1;
        if (A_REGS) {
            const uint16_t *a0 = A + (size_t)(w * 64 + 16 * r + g) * K + 16 * s + 2 * t,
                           *a8 = a0 + 8 * K;
            uint32_t a[4] = {pack(a0[0], a0[1]), pack(a8[0], a8[1]), pack(a0[8], a0[9]),
                             pack(a8[8], a8[9])};
            ft_wgmma_rs<N, TRANS_B>(d, a, db, scale);
        } else if (!TRANS_B) {
            ft_wgmma_ss<N>(d, da, db, scale);
        } else { /* no wrapper takes an MN-major B with A from shared memory */
            cudaemu_wgmma_bf16(d, N, NULL, da, db, scale, 1, __FILE__, __LINE__);
        }
    }
    ft_wgmma_commit();
    ft_wgmma_wait<0>();
    store_d<N>(D + w * 64 * N, d);
}

/* Two groups, k step 0 into d1 (with C) and k step 1 into d2 (scale-d 0); D[0..4] (64 x
 * 64 each): d1 and d2 before any wait, both after wait_group 1, d2 after wait_group 0. */
__global__ void order_kernel(float *D, const uint8_t *image, const float *C, wg_case c)
{
    uint8_t *base = load_image(image, c);
    uint32_t sa = ft_smem_address(base);
    float d1[32], d2[32];
    load_d<64>(d1, C);
    for (int i = 0; i < 32; i++)
        d2[i] = -7.0f;
    ft_wgmma_fence();
    for (int s = 0; s < 2; s++) {
        uint64_t db = c.b_desc | ((sa + c.b_off + s * c.b_step) & 0x3FFFFu) >> 4;
        uint64_t da = c.a_desc | ((sa + c.a_off[0] + s * c.a_step) & 0x3FFFFu) >> 4;
        ft_wgmma_ss<64>(s ? d2 : d1, da, db, !s);
        ft_wgmma_commit();
    }
    store_d<64>(D, d1);
    store_d<64>(D + 4096, d2);
    ft_wgmma_wait<1>();
    store_d<64>(D + 2 * 4096, d1);
    store_d<64>(D + 3 * 4096, d2);
    ft_wgmma_wait<0>();
    store_d<64>(D + 4 * 4096, d2);
}

/* The helpers' reading of the 128-byte swizzle: A (64 x 64) and B (64 x N, k x n) from
 * plain row-major matrices into tiles at ft_swz128's positions, four k steps through
 * ft_wgmma_desc_sw128. B K-major (rows of n, A from shared memory) or MN-major (rows of
 * k, blocks of 64 n 8192 bytes apart, A from registers). */
template <int N, int TRANS_B>
__global__ void swz_kernel(float *D, const uint16_t *A, const uint16_t *B)
{
    FT_DYNAMIC_SMEM(uint8_t, smem);
    uint8_t *base = smem + ((1024u - (ft_smem_address(smem) & 1023u)) & 1023u);
    uint8_t *bt = base + 8192;
    for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
        int m = i / 64, k = i % 64;
        memcpy(base + ft_swz128(m * 128 + 2 * k), &A[i], 2);
    }
    for (int i = threadIdx.x; i < 64 * N; i += blockDim.x) {
        int k = i / N, n = i % N;
        uint32_t at = TRANS_B ? (n / 64) * 8192 + ft_swz128(k * 128 + 2 * (n % 64))
                              : ft_swz128(n * 128 + 2 * k);
        memcpy(bt + at, &B[i], 2);
    }
    ft_fence_proxy_async();
    __syncthreads();
    int r = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4;
    float d[N / 2];
    ft_wgmma_fence();
    for (int s = 0; s < 4; s++) {
        if (TRANS_B) {
            const uint16_t *a0 = A + (16 * r + g) * 64 + 16 * s + 2 * t, *a8 = a0 + 8 * 64;
            uint32_t a[4] = {pack(a0[0], a0[1]), pack(a8[0], a8[1]), pack(a0[8], a0[9]),
                             pack(a8[8], a8[9])};
            ft_wgmma_rs<N, 1>(d, a, ft_wgmma_desc_sw128(ft_smem_address(bt) + 2048 * s, 8192, 1024),
                              s);
        } else {
            ft_wgmma_ss<N>(d, ft_wgmma_desc_sw128(ft_smem_address(base) + 32 * s, 16, 1024),
                           ft_wgmma_desc_sw128(ft_smem_address(bt) + 32 * s, 16, 1024), s);
        }
    }
    ft_wgmma_commit();
    ft_wgmma_wait<0>();
    store_d<N>(D, d);
}

/* A 128-byte-swizzled m64n64k16 (image: A at 0, B at 1024 * 8), broken as `which` says. */
__global__ void defect_kernel(float *D, const uint8_t *image, wg_case c, int which)
{
    __shared__ uint8_t static_smem[64];
    if (which == 9 && threadIdx.x >= 96) /* warp 3 skips the warpgroup's instructions */
        return;
    uint8_t *base = load_image(image, c);
    uint32_t sa = ft_smem_address(base);
    uint64_t da = c.a_desc | (sa + c.a_off[0]) >> 4, db = c.b_desc | (sa + c.b_off) >> 4;
    float d[32] = {0};
    if (which == 4) /* B's start past the end of dynamic shared memory */
        db = c.b_desc | ((sa + c.image_bytes) & 0x3FFFFu) >> 4;
    if (which == 5)
        db |= (uint64_t)1 << 49; /* matrix base offset 1 */
    if (which == 8 && threadIdx.x / 32 == 1)
        db += 2; /* warp 1's B starts 32 bytes on */
    if (which == 10)
        ft_smem_address(static_smem + threadIdx.x % 64);
    if (which != 0)
        ft_wgmma_fence();
    ft_wgmma_ss<64>(d, da, db, 1);
    if (which != 7)
        ft_wgmma_commit();
    if (which == 1)
        d[5] = 1.0f; /* written while the wgmma is pending */
    if (which == 2) {
        __syncthreads();
        if (threadIdx.x == 0)
            base[c.b_off] ^= 0x40; /* B's first element, still being read */
    }
    if (which != 3)
        ft_wgmma_wait<0>();
    if (which == 12) { /* the next batch without its wgmma.fence */
        ft_wgmma_ss<64>(d, da, db, 1);
        ft_wgmma_commit();
        ft_wgmma_wait<0>();
    }
    store_d<64>(D, d);
}

/* ---------------------------------------------------------------- host */

/* The harness's rounding: each wgmma adds (scale-d ? D : 0) and its 16 products in fp64
 * and rounds once; D = C, then k steps of 16. A: rows x K, B: K x N. */
static void reference(float *D, const uint16_t *A, const uint16_t *B, const float *C, int K,
                      int N, int scale_d0)
{
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < N; j++) {
            float acc = C[i * N + j];
            for (int s = 0; s < K / 16; s++) {
                double sum = (s == 0 && !scale_d0) ? 0.0 : (double)acc;
                for (int k = 16 * s; k < 16 * s + 16; k++)
                    sum += (double)bf(A[i * K + k]) * (double)bf(B[k * N + j]);
                acc = (float)sum;
            }
            D[i * N + j] = acc;
        }
}

static int count_bad(const float *got, const float *want, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += memcmp(&got[i], &want[i], 4) != 0;
    return bad;
}

/* The image of one case: A tiles for two warpgroups (K-major), B (K-major, or MN-major). */
struct image_case {
    uint8_t image[40960];
    uint16_t A[2 * 64 * 64], B[64 * 128], Bt[128 * 64]; /* A: w x 64 x K; B: K x N; Bt: N x K */
    wg_case c;
};

static void build_case(image_case *ic, int mode, int N, int K, int trans_b, int ksteps)
{
    static uint8_t used[sizeof ic->image];
    memset(ic->image, 0xEE, sizeof ic->image);
    memset(used, 0, sizeof used);
    for (int i = 0; i < 2 * 64 * K; i++)
        ic->A[i] = rnd_bf16();
    for (int i = 0; i < K * N; i++)
        ic->B[i] = rnd_bf16();
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            ic->Bt[n * K + k] = ic->B[k * N + n];
    int w = swizzle_bytes(mode);
    /* A: 64 rows; none: LBO after all row groups, SBO 128; 32B, 64B: SBO two atoms, so that
     * it is not the packed stride; 128B: packed (1024) */
    tile a0 = mode == SW_NONE ? make_tile(0, 64, K, false, mode, 1024, 128)
                              : make_tile(0, 64, K, false, mode, 16, (mode == SW_128 ? 8 : 16) * w);
    tile a1 = a0;
    a1.off = a0.bytes;
    tile b;
    if (!trans_b && mode == SW_NONE)
        b = make_tile(0, N, K, false, mode, 128, (uint32_t)K / 8 * 128);
    else if (!trans_b)
        b = make_tile(0, N, K, false, mode, 16, 8 * w);
    else if (mode == SW_NONE)
        b = make_tile(0, N, K, true, mode, (uint32_t)N / 8 * 128, 128);
    else
        b = make_tile(0, N, K, true, mode, (uint32_t)K / 8 * 8 * w, 8 * w);
    b.off = 2 * a0.bytes;
    if (b.off + b.bytes > sizeof ic->image) {
        printf("FAIL: test image too small\n");
        exit(1);
    }
    store_tile(ic->image, used, a0, ic->A, 64, K);
    store_tile(ic->image, used, a1, ic->A + 64 * K, 64, K);
    store_tile(ic->image, used, b, ic->Bt, N, K); /* B's rows are its N index */
    wg_case &c = ic->c;
    memset(&c, 0, sizeof c);
    c.ksteps = ksteps;
    c.scale_d = 1;
    c.fence_proxy = 1;
    c.a_off[0] = a0.off;
    c.a_off[1] = a1.off;
    c.b_off = b.off;
    c.a_step = canon_offset(a0.c, 0, 16); /* a k slice's unswizzled start */
    c.b_step = canon_offset(b.c, 0, 16);
    c.image_bytes = b.off + b.bytes;
    c.a_desc = desc_bits(a0);
    c.b_desc = desc_bits(b);
}

static image_case ic;

template <int N, int A_REGS, int TRANS_B>
static void run_case(int mode, int K, int warpgroups, int scale_d, int cp_async)
{
    build_case(&ic, mode, N, K, TRANS_B, K / 16);
    ic.c.scale_d = scale_d;
    ic.c.cp_async = cp_async;
    static float C[2 * 64 * 128], want[2 * 64 * 128], got[2 * 64 * 128];
    for (int i = 0; i < warpgroups * 64 * N; i++)
        C[i] = bf(rnd_bf16()) * 4.0f;
    for (int w = 0; w < warpgroups; w++)
        reference(want + w * 64 * N, ic.A + w * 64 * K, ic.B, C + w * 64 * N, K, N, scale_d);
    uint8_t *dimage = (uint8_t *)dev_copy(ic.image, ic.c.image_bytes);
    uint16_t *dA = (uint16_t *)dev_copy(ic.A, sizeof ic.A);
    float *dC = (float *)dev_copy(C, sizeof C), *dD = (float *)dev(sizeof got);
    FT_LAUNCH((wg_kernel<N, A_REGS, TRANS_B>), 1, 128 * warpgroups, ic.c.image_bytes + 1024,
              (cudaStream_t)0)(dD, dimage, dA, dC, K, ic.c);
    cudaMemcpy(got, dD, sizeof got, cudaMemcpyDeviceToHost);
    int bad = count_bad(got, want, warpgroups * 64 * N);
    static const char *const names[] = {"none", "128B", "64B", "32B"};
    CHECK(bad == 0, "m64n%dk16 x %d k steps, %s swizzle, A %s, B %s-major, %d warpgroup(s)%s%s: "
          "%d of %d elements differ from the matmul",
          N, K / 16, names[mode], A_REGS ? "from registers" : "K-major", TRANS_B ? "MN" : "K",
          warpgroups, scale_d ? "" : ", scale-d 0", cp_async ? ", cp.async" : "", bad,
          warpgroups * 64 * N);
    cudaFree(dimage), cudaFree(dA), cudaFree(dC), cudaFree(dD);
}

static void test_layouts(void)
{
    static const int modes[] = {SW_NONE, SW_32, SW_64, SW_128};
    for (int i = 0; i < 4; i++) {
        int mode = modes[i], K = mode == SW_32 ? 16 : mode == SW_64 ? 32 : 64;
        int wgs = 1 + (i & 1);
        run_case<64, 0, 0>(mode, K, wgs, 1, 0);
        run_case<64, 0, 1>(mode, K, 3 - wgs, 1, 0);
        run_case<64, 1, 0>(mode, K, wgs, 1, 0);
        run_case<64, 1, 1>(mode, K, 3 - wgs, 1, 0);
        run_case<128, 0, 0>(mode, K, 3 - wgs, 1, 0);
        run_case<128, 0, 1>(mode, K, wgs, 1, 0);
        run_case<128, 1, 0>(mode, K, 3 - wgs, 1, 0);
        run_case<128, 1, 1>(mode, K, wgs, 1, 0);
    }
    printf("ok   wgmma m64n64k16, m64n128k16: the four swizzles, A K-major or from registers, "
           "B K- or MN-major, k chains, two warpgroups\n");
    run_case<128, 0, 0>(SW_128, 64, 2, 0, 0);
    run_case<64, 1, 1>(SW_64, 32, 1, 0, 0);
    printf("ok   wgmma scale-d 0 ignores the accumulator\n");
    run_case<64, 0, 0>(SW_128, 64, 2, 1, 1);
    printf("ok   wgmma reads a tile loaded by cp.async and fenced with fence.proxy.async\n");
}

template <int N, int TRANS_B>
static void run_swz(void)
{
    static uint16_t A[64 * 64], B[64 * 128];
    static float zero[64 * 128], want[64 * 128], got[64 * 128];
    for (int i = 0; i < 64 * 64; i++)
        A[i] = rnd_bf16();
    for (int i = 0; i < 64 * N; i++)
        B[i] = rnd_bf16();
    reference(want, A, B, zero, 64, N, 0);
    uint16_t *dA = (uint16_t *)dev_copy(A, sizeof A), *dB = (uint16_t *)dev_copy(B, sizeof B);
    float *dD = (float *)dev(sizeof got);
    FT_LAUNCH((swz_kernel<N, TRANS_B>), 1, 128, 8192 + 16384 + 1024, (cudaStream_t)0)(dD, dA, dB);
    cudaMemcpy(got, dD, sizeof got, cudaMemcpyDeviceToHost);
    int bad = count_bad(got, want, 64 * N);
    CHECK(bad == 0, "ft_swz128 tiles through ft_wgmma_desc_sw128, N %d, B %s-major: %d of %d "
          "elements differ", N, TRANS_B ? "MN" : "K", bad, 64 * N);
    cudaFree(dA), cudaFree(dB), cudaFree(dD);
}

static void test_helpers(void)
{
    run_swz<64, 0>();
    run_swz<128, 0>();
    run_swz<64, 1>();
    run_swz<128, 1>();
    printf("ok   ft_swz128 + ft_wgmma_desc_sw128 give the matrix back (K- and MN-major B)\n");
}

static void test_order(void)
{
    build_case(&ic, SW_128, 64, 32, 0, 2);
    static float C[64 * 64], want1[64 * 64], want2[64 * 64], got[5 * 4096], zero[4096];
    for (int i = 0; i < 64 * 64; i++)
        C[i] = bf(rnd_bf16());
    /* step 0: A[:, 0:16] B[0:16, :] + C; step 1: A[:, 16:32] B[16:32, :] from 0 */
    static uint16_t A0[64 * 16], A1[64 * 16], B0[16 * 64], B1[16 * 64];
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 16; k++) {
            A0[i * 16 + k] = ic.A[i * 32 + k];
            A1[i * 16 + k] = ic.A[i * 32 + 16 + k];
        }
    memcpy(B0, ic.B, sizeof B0);
    memcpy(B1, ic.B + 16 * 64, sizeof B1);
    reference(want1, A0, B0, C, 16, 64, 1);
    reference(want2, A1, B1, zero, 16, 64, 0);
    uint8_t *dimage = (uint8_t *)dev_copy(ic.image, ic.c.image_bytes);
    float *dC = (float *)dev_copy(C, sizeof C), *dD = (float *)dev(sizeof got);
    FT_LAUNCH(order_kernel, 1, 128, ic.c.image_bytes + 1024, (cudaStream_t)0)(dD, dimage, dC, ic.c);
    cudaMemcpy(got, dD, sizeof got, cudaMemcpyDeviceToHost);
    static float minus7[4096];
    for (int i = 0; i < 4096; i++)
        minus7[i] = -7.0f;
    CHECK(count_bad(got, C, 4096) == 0, "an accumulator changed before any wait");
    CHECK(count_bad(got + 4096, minus7, 4096) == 0, "an accumulator changed before any wait");
    CHECK(count_bad(got + 2 * 4096, want1, 4096) == 0, "wait_group 1: the older group not landed");
    CHECK(count_bad(got + 3 * 4096, minus7, 4096) == 0, "wait_group 1: the newer group landed");
    CHECK(count_bad(got + 4 * 4096, want2, 4096) == 0, "wait_group 0: the newer group not landed");
    cudaFree(dimage), cudaFree(dC), cudaFree(dD);
    printf("ok   wgmma results land at the covering wait_group, not before; wait_group 1 keeps "
           "the newest group pending\n");
}

static void run_defect(int which)
{
    build_case(&ic, SW_128, 64, 16, 0, 1);
    ic.c.cp_async = which == 11;
    ic.c.fence_proxy = which != 11;
    uint8_t *dimage = (uint8_t *)dev_copy(ic.image, ic.c.image_bytes);
    float *dD = (float *)dev(64 * 64 * 4);
    FT_LAUNCH(defect_kernel, 1, which == 6 ? 64 : 128, ic.c.image_bytes + 1024,
              (cudaStream_t)0)(dD, dimage, ic.c, which);
    cudaDeviceSynchronize();
}

int main(void)
{
    test_layouts();
    test_helpers();
    test_order();
    expect_finding("wgmma without wgmma.fence", run_defect, 0, "no wgmma.fence");
    expect_finding("a second batch without wgmma.fence after a wait", run_defect, 12,
                   "no wgmma.fence since its last wgmma.wait_group");
    expect_finding("accumulator written before the wait", run_defect, 1,
                   "register 5) was written before this wait");
    expect_finding("shared memory changed before the wait", run_defect, 2,
                   "operand B changed in shared memory");
    expect_finding("exit with a wgmma pending", run_defect, 3, "exited with the wgmma.mma_async");
    expect_finding("descriptor past dynamic shared memory", run_defect, 4,
                   "outside the block's dynamic shared memory");
    expect_finding("matrix base offset", run_defect, 5, "matrix base offset 1");
    expect_finding("wgmma in a block of 64 threads", run_defect, 6, "does not fill");
    expect_finding("wgmma never committed", run_defect, 7, "never committed");
    expect_finding("warps of a warpgroup disagree", run_defect, 8,
                   "the four warps of a warpgroup must execute the same");
    expect_finding("a warp skips the warpgroup's wgmma", run_defect, 9,
                   "warp 3 executed 0 warpgroup instructions");
    expect_finding("static shared memory in a descriptor", run_defect, 10,
                   "not in the block's dynamic shared memory");
    expect_finding("cp.async tile without fence.proxy.async", run_defect, 11,
                   "after that thread's last fence.proxy.async");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
