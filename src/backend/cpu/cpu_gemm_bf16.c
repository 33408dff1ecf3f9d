/* Native bf16 GEMM for CPUs with AVX512-BF16 (Intel Cooper Lake, Sapphire Rapids and
 * later; AMD Zen 4 and later): c[m,n] = alpha * op(a) op(b) + beta * c with a and b
 * stored as bf16, products summed in fp32, c stored as fp32 or bf16 and rounded once.
 *
 * The instruction is VDPBF16PS: for each fp32 lane i of a 512-bit register,
 *     acc[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1]
 * over 32 bf16 pairs, twice the multiply-adds of an fp32 FMA of the same width. The
 * products of two bf16 values are exact in fp32 (8-bit significands); the two adds
 * round to nearest even. Denormal bf16 inputs count as zero and denormal results
 * flush to zero (the instruction ignores MXCSR): differences from the widening path
 * (cpu_widen.c) are summation order and those denormals, both far below bf16's
 * own rounding.
 *
 * Blocking (Goto's, with K split in pairs because the instruction consumes k in
 * pairs):
 *   for each NC-column block of c:
 *     for each KC block of k:          pack op(b) [KC x NC] and op(a) [m x KC] in pairs
 *       for every MR x NR tile:        the micro-kernel, MR x NR fp32 accumulators in
 *                                      24 zmm registers, over KC/2 pairs
 * A tile accumulates into fp32: c itself when c is fp32; for a bf16 c whose k is one
 * block (most of a training step's GEMMs), the micro-kernel rounds its registers into c
 * directly; for a longer k, into an fp32 workspace of m x NC (bounded; not m x n)
 * rounded into c once after the last KC block. Either way a bf16 output is rounded
 * exactly once.
 *
 * Determinism: each element of c is the same sequence of instructions whatever the
 * number of threads (threads split tiles, never k), so runs repeat bitwise and resume
 * is exact.
 *
 * Packed layouts (uint32 = one bf16 pair, the low half the even k):
 *   b panel p (NR columns):  [KC/2 pairs][NR]      -> two zmm loads per pair
 *   a panel q (MR rows):     [KC/2 pairs][MR]      -> one 32-bit broadcast per row
 * An odd k's last pair and the rows/columns past the edges are packed as zeros. */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "util/bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FT_HAVE_BF16_GEMM 1
#include <immintrin.h>
#endif

#define GEMM_MR 12
#define GEMM_NR 32
#define GEMM_KC 1024 /* k values per block: most of a step's GEMMs are one block; a b panel
                      * (KC x NR x 2 B = 64 KiB) and a row block of a stream from L2 */
#define GEMM_MC_TILES 16 /* row tiles (MC = 192 rows) of packed a swept per b panel */
#define GEMM_NC 4096 /* columns per block: op(a) is packed n/NC times; a bf16 c's fp32
                      * workspace is m x NC x 4 B */

typedef struct gemm_operand {
    const uint16_t *p;
    bool trans; /* element (r, kk) of op(x) is p[kk * ld + r] instead of p[r * ld + kk] */
    long ld;
} gemm_operand;

#ifdef FT_HAVE_BF16_GEMM
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* Packs rows [r0, r0 + rows) of op(x) (x is a or b^T: both indexed (row, k)) over
 * k range [k0, k0 + kc) into panels of `width` rows: panel q holds, for each pair,
 * `width` consecutive uint32. Rows past `rows` and an odd kc's last half are zero.
 * Row-major rows (not trans) hold each pair as one aligned-or-not 32-bit word;
 * transposed storage interleaves two k rows, `width` elements at a time. */
BF16_TARGET static void pack_panels(uint32_t *dst, const gemm_operand *x, long r0, long rows, long k0,
                        long kc, int width)
{
    const long pairs = (kc + 1) / 2, panels = (rows + width - 1) / width;
    const long full = kc / 2;           /* pairs with both halves inside k */
#pragma omp for schedule(static)
    for (long q = 0; q < panels; q++) {
        uint32_t *out = dst + q * pairs * width;
        const long rq = rows - q * width < width ? rows - q * width : width;
        const long rbase = r0 + q * width;
        if (!x->trans) {
            for (long w = 0; w < rq; w++) {
                const uint16_t *src = x->p + (rbase + w) * x->ld + k0;
                for (long p = 0; p < full; p++) {
                    uint32_t v;
                    memcpy(&v, src + 2 * p, sizeof v);
                    out[p * width + w] = v;
                }
                if (full < pairs) /* odd kc: the last pair's high half is past k */
                    out[full * width + w] = src[2 * full];
            }
        } else {
            for (long p = 0; p < pairs; p++) {
                const uint16_t *lo = x->p + (k0 + 2 * p) * x->ld + rbase;
                const uint16_t *hi = p < full ? lo + x->ld : NULL;
                uint32_t *o = out + p * width;
                /* 16 rows at a time: zero-extend each k row's halves to 32 bits and
                 * put the odd k's in the high halves */
                for (long w = 0; w < rq; w += 16) {
                    const __mmask16 m = rq - w >= 16 ? 0xffff : (__mmask16)((1u << (rq - w)) - 1);
                    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo + w));
                    if (hi)
                        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_cvtepu16_epi32(
                                                   _mm256_maskz_loadu_epi16(m, hi + w)), 16));
                    _mm512_mask_storeu_epi32(o + w, m, v);
                }
            }
        }
        for (long p = 0; p < pairs && rq < width; p++)
            for (long w = rq; w < width; w++)
                out[p * width + w] = 0;
    }
}

/* Where a tile's result goes: fp32 (c itself or the workspace), accumulated over k
 * blocks, or, when k is one block and c is bf16, straight into c rounded once. */
typedef struct tile_out {
    float *f32;      /* NULL: bf16 */
    uint16_t *bf16;
    long ld;
    bool first;      /* the first k block: beta applies (and c is read only if beta != 0) */
} tile_out;

/* Round to nearest even, 16 lanes: ft_f32_to_bf16 (util/bf16.h) lane by lane, NaN kept
 * a quiet NaN with its sign. */
BF16_TARGET static inline __m256i round_to_bf16(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* The mr x nr corner of the MR x NR tile at `row0, col0` of `out` becomes
 *   alpha * sum + (first ? beta * c : c)
 * with sum over `pairs` pairs of the packed panels. `halves` (a constant of each
 * instantiation below) is how many 16-column halves of the tile are computed: a tile
 * of at most 16 columns (the n = rank GEMMs of LoRA's adapters) skips the right half's
 * multiply-adds, which are all zeros. A lane's instructions are the same either way,
 * so is its result. */
BF16_TARGET static inline __attribute__((always_inline)) void
micro_kernel_halves(long pairs, const uint32_t *restrict ap, const uint32_t *restrict bp,
                    const tile_out *out, long row0, long col0, int mr, int nr, float alpha,
                    float beta, const int halves)
{
    __m512 acc[GEMM_MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < GEMM_MR; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (long p = 0; p < pairs; p++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * GEMM_NR);
        const __m512bh b1 = halves == 2 ? (__m512bh)_mm512_loadu_si512(bp + p * GEMM_NR + 16)
                                        : (__m512bh)_mm512_setzero_si512();
        const uint32_t *a = ap + p * GEMM_MR;
#pragma GCC unroll 12
        for (int r = 0; r < GEMM_MR; r++) {
            const __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
            if (halves == 2)
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    const bool read_c = !out->first || beta != 0.0f;
    for (int r = 0; r < mr; r++) {
        const long at = (row0 + r) * out->ld + col0;
        for (int h = 0; h < 2; h++) {
            const __mmask16 m = h ? m1 : m0;
            if (!m)
                continue;
            __m512 old = _mm512_setzero_ps();
            if (out->f32) {
                float *c = out->f32 + at + 16 * h;
                if (read_c)
                    old = _mm512_maskz_loadu_ps(m, c);
                if (out->first)
                    old = _mm512_mul_ps(old, vb);
                _mm512_mask_storeu_ps(c, m, _mm512_fmadd_ps(va, acc[r][h], old));
            } else {
                uint16_t *c = out->bf16 + at + 16 * h;
                if (read_c) /* bf16 -> fp32 is a 16-bit shift */
                    old = _mm512_mul_ps(vb, _mm512_castsi512_ps(_mm512_slli_epi32(
                                                _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, c)), 16)));
                _mm256_mask_storeu_epi16(c, m, round_to_bf16(_mm512_fmadd_ps(va, acc[r][h], old)));
            }
        }
    }
}

BF16_TARGET static void micro_kernel(long pairs, const uint32_t *restrict ap,
                                     const uint32_t *restrict bp, const tile_out *out,
                                     long row0, long col0, int mr, int nr, float alpha, float beta)
{
    if (nr > 16)
        micro_kernel_halves(pairs, ap, bp, out, row0, col0, mr, nr, alpha, beta, 2);
    else
        micro_kernel_halves(pairs, ap, bp, out, row0, col0, mr, nr, alpha, beta, 1);
}
#endif

bool ft_cpu_gemm_bf16_available(void)
{
#ifdef FT_HAVE_BF16_GEMM
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
#else
    return false;
#endif
}

/* Rounds rows x cols of the fp32 workspace (ldw) into c (bf16, ldc). */
static void round_block(uint16_t *c, long ldc, const float *w, long ldw, long rows, long cols)
{
#pragma omp for schedule(static)
    for (long r = 0; r < rows; r++)
        for (long j = 0; j < cols; j++)
            c[r * ldc + j] = ft_f32_to_bf16(w[r * ldw + j]);
}

/* Widens rows x cols of c (bf16) into the workspace, beta applied by the kernel. */
static void widen_block(float *w, long ldw, const uint16_t *c, long ldc, long rows, long cols)
{
#pragma omp for schedule(static)
    for (long r = 0; r < rows; r++)
        for (long j = 0; j < cols; j++)
            w[r * ldw + j] = ft_bf16_to_f32(c[r * ldc + j]);
}

int ft_cpu_gemm_bf16(ft_dtype ct, void *c, const uint16_t *a, const uint16_t *b, int m, int n,
                     int k, bool trans_a, bool trans_b, float alpha, float beta)
{
#ifndef FT_HAVE_BF16_GEMM
    (void)ct, (void)c, (void)a, (void)b, (void)m, (void)n, (void)k, (void)trans_a;
    (void)trans_b, (void)alpha, (void)beta;
    return -1;
#else
    /* op(a) is [m,k]: a stored [m,k] (ld k) or [k,m] (ld m). op(b) is [k,n], packed as
     * its transpose [n,k]: b stored [n,k] when trans_b (ld k), else [k,n] (ld n). */
    const gemm_operand A = { a, trans_a, trans_a ? m : k };
    const gemm_operand Bt = { b, !trans_b, trans_b ? k : n };
    const long nc_max = n < GEMM_NC ? n : GEMM_NC;
    const long m_pad = (m + GEMM_MR - 1) / GEMM_MR * GEMM_MR;
    const long nc_pad = (nc_max + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
    const long kc_pairs = (GEMM_KC + 1) / 2;
    /* a bf16 c needs an fp32 workspace only when k spans several blocks */
    const bool use_work = ct != FT_DTYPE_F32 && k > GEMM_KC;
    uint32_t *ap = aligned_alloc(64, (size_t)m_pad * kc_pairs * 4);
    uint32_t *bp = aligned_alloc(64, (size_t)nc_pad * kc_pairs * 4);
    float *work = use_work ? malloc((size_t)m * nc_max * sizeof(float)) : NULL;
    if (!ap || !bp || (use_work && !work)) {
        free(ap);
        free(bp);
        free(work);
        return -1;
    }
    const long ldc = n;
#pragma omp parallel
    for (long jc = 0; jc < n; jc += GEMM_NC) {
        const long nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
        tile_out out = { NULL, NULL, ldc, true };
        if (ct == FT_DTYPE_F32)
            out.f32 = (float *)c + jc;
        else if (use_work)
            out.f32 = work, out.ld = nc;
        else
            out.bf16 = (uint16_t *)c + jc;
        if (use_work && beta != 0.0f)
            widen_block(work, nc, (const uint16_t *)c + jc, ldc, m, nc);
        for (long pc = 0; pc < (k > 0 ? k : 1); pc += GEMM_KC) {
            const long kc = k - pc < GEMM_KC ? (k > 0 ? k - pc : 0) : GEMM_KC;
            const long pairs = (kc + 1) / 2;
            out.first = pc == 0;
            pack_panels(bp, &Bt, jc, nc, pc, kc, GEMM_NR);
            pack_panels(ap, &A, 0, m, pc, kc, GEMM_MR);
            /* implicit barrier of the omp for loops above: both panels are complete */
            const long tiles_n = (nc + GEMM_NR - 1) / GEMM_NR;
            const long tiles_m = (m + GEMM_MR - 1) / GEMM_MR;
            /* MC rows of packed a at a time stay in L2 while the threads sweep their b
             * panels over them; a row block's tiles are disjoint from the next one's, so
             * no barrier between blocks, only before the next packing. The threads share
             * the block's (column, row) tiles, not just its columns: a c of one column
             * tile (n <= 32: LoRA's n = rank GEMMs) is then still split between them. */
            for (long ib = 0; ib < tiles_m; ib += GEMM_MC_TILES) {
                const long ie = ib + GEMM_MC_TILES < tiles_m ? ib + GEMM_MC_TILES : tiles_m;
#pragma omp for collapse(2) schedule(static) nowait
                for (long tj = 0; tj < tiles_n; tj++)
                    for (long ti = ib; ti < ie; ti++) {
                        const int mr = (int)(m - ti * GEMM_MR < GEMM_MR ? m - ti * GEMM_MR : GEMM_MR);
                        const int nr = (int)(nc - tj * GEMM_NR < GEMM_NR ? nc - tj * GEMM_NR : GEMM_NR);
                        micro_kernel(pairs, ap + ti * pairs * GEMM_MR, bp + tj * pairs * GEMM_NR,
                                     &out, ti * GEMM_MR, tj * GEMM_NR, mr, nr, alpha, beta);
                    }
            }
#pragma omp barrier
        }
        if (use_work)
            round_block((uint16_t *)c + jc, ldc, work, nc, m, nc);
    }
    free(ap);
    free(bp);
    free(work);
    return 0;
#endif
}
