/* The dK/dV pass's shared layout (cuda_attention_tc_bwd.cu, FTMPI_TC_BWD_LAYOUT=shared):
 * FlashAttention-2's division of a (64-query, 128-key) tile pair among 8 warps, with P^T
 * and dS^T passed through shared memory between the products that want them in different
 * warp layouts.
 *
 * The own layout gives each warp 16 keys for everything: it computes S^T and dP^T of its
 * keys against all 64 queries (each Q and dO fragment read from shared memory feeds one
 * product) and keeps its keys' dK and dV rows over all features. Per warp and tile that
 * is 72 KiB of ldmatrix reads for 256 products at head_dim 128, 288 bytes a product,
 * which puts the pass at the shared-memory bandwidth's limit before the tensor cores'.
 * Here:
 *   phase A  warp (wk, wq) = (w % 4, w / 4) computes S^T and dP^T of keys 32 wk .. +31
 *            against queries 32 wq .. +31 (two m-tiles: every Q and dO fragment feeds two
 *            products, every K and V fragment four), makes P^T and dS^T and stores them,
 *            rounded to bf16, into Ps and dSs ([128 keys][64 queries + pad]);
 *   barrier;
 *   phase B  warp (wk, wf) = (w % 4, w / 4) adds P^T dO to dV and dS^T Q to dK for keys
 *            32 wk .. +31 and the feature half wf: its accumulators are 32 keys x half the
 *            features (as many registers as the own layout's 16 keys x all of them);
 *   phase C  (the one-pass backward) warp (wq, wf) = (w / 4, w % 4) adds dS K for queries
 *            32 wq .. +31 and feature quarter wf to the fp32 dQ accumulator, summed over
 *            all 128 keys before its atomics.
 * About 234 bytes of ldmatrix reads and stores a product at head_dim 128. The summation
 * order of every dK and dV element (query tiles in the walk's order, 16 queries a k-step
 * within a tile) is that of the own layout, so both layouts give the same bits. The
 * two-pass backward's dQ pass has a shared layout too (below). */
#ifndef FT_CUDA_ATTENTION_TC_BWD_SHARED_CUH
#define FT_CUDA_ATTENTION_TC_BWD_SHARED_CUH

#include "cuda_attention_tc.cuh"

#define TC_SH_PITCH (TC_BQ + TC_PAD) /* bf16 per row of Ps and dSs */

/* p[0] += a, p[1] += b (global memory, p 8-byte aligned): on sm_90 one vector reduction
 * (red.global.add.v2.f32, PTX 8.1: half the atomic operations the L2 takes), elsewhere
 * and on the harness two scalar ones. Each element is added atomically either way, and
 * flushed like atomicAdd's (FTZ, round to nearest). */
__device__ __forceinline__ void tc_red_add2(float *p, float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(FT_CUDA_EMULATION)
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

/* One accumulator fragment added to the fp32 rows dq_head (dq's layout): acc[0..1] at row
 * r0, acc[2..3] at row r0 + 8, columns c and c + 1 (c even, rows of an even number of
 * floats: 8-byte aligned pairs); rows past the sequence and columns past the head left
 * out. */
__device__ __forceinline__ void tc_red_frag(float *dq_head, const float acc[4], int r0, int c,
                                            const TcArgs &a)
{
    if (c >= a.hd)
        return;
    if (r0 < a.seq)
        tc_red_add2(dq_head + (size_t)r0 * a.q_stride + c, acc[0], acc[1]);
    if (r0 + 8 < a.seq)
        tc_red_add2(dq_head + (size_t)(r0 + 8) * a.q_stride + c, acc[2], acc[3]);
}

/* x = A1 X^T and y = A2 Y^T (fp32, zeroed first) for a warp's 32 rows (rows ra .. of the
 * row-major tiles A1, A2) against 32 columns (rows rx .. of the token tiles X, Y) over
 * HDMAX features: two m-tiles and four 8-column groups, so that every A fragment read
 * from shared memory feeds four products and every X, Y fragment two. dK/dV: A = K, V and
 * X = Q, dO (S^T, dP^T); dQ: A = Q, dO and X = K, V (S, dP). */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_products(float (*x)[4][4], float (*y)[4][4],
                                                   const uint16_t *A1, const uint16_t *A2, int ra,
                                                   const uint16_t *X, const uint16_t *Y, int rx,
                                                   int lane)
{
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                x[m][n][e] = y[m][n][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HDMAX / 16; ks++) {
        uint32_t a1[2][4], a2[2][4];
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int off = tc_a_frag_row(ra + 16 * m, lane, P) + ks * 16;
            ft_ldmatrix<4, false>(a1[m], A1 + off);
            ft_ldmatrix<4, false>(a2[m], A2 + off);
        }
#pragma unroll
        for (int n = 0; n < 4; n += 2) {
            const int off = tc_bt_pair_row(rx + 8 * n, lane, P) + ks * 16;
            uint32_t xf[4], yf[4];
            ft_ldmatrix<4, false>(xf, X + off);
            ft_ldmatrix<4, false>(yf, Y + off);
#pragma unroll
            for (int m = 0; m < 2; m++) {
                tc_mma_pair(x[m][n], x[m][n + 1], a1[m], xf);
                tc_mma_pair(y[m][n], y[m][n + 1], a2[m], yf);
            }
        }
    }
}

/* Phase A for warp (wk, wq): S^T and dP^T of its 32 keys (kw0 = k0 + 32 wk) against its 32
 * queries (32 wq .. of the tile at q0), the probabilities and dS from them, stored as bf16
 * pairs into Ps and dSs; zeros where cls is TC_SKIP (no pair of the footprint visible).
 * Qt, dOt, lse_t (base 2) and D_t are the staged query tile; P the K/V/Q row pitch. */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_scores(uint16_t *Ps, uint16_t *dSs, const uint16_t *Ks,
                                                 const uint16_t *Vs, const uint16_t *Qt,
                                                 const uint16_t *dOt, const float *lse_t,
                                                 const float *D_t, const TcArgs &a, int b,
                                                 int q0, int kw0, int wk, int wq, int cls,
                                                 int lane)
{
    const int g = lane / 4, t = lane % 4;
    float s[2][4][4] = {}, dp[2][4][4] = {}; /* zeros where the warp skips */
    if (cls != TC_SKIP)
        tc_shared_products<HDMAX, P>(s, dp, Ks, Vs, 32 * wk, Qt, dOt, 32 * wq, lane);
    const bool masked = cls == TC_MASKED;
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++) {
            float pe[4], dse[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = 32 * wq + 8 * n + 2 * t + (e & 1); /* query of the tile */
                float p = cls == TC_SKIP ? 0.0f
                                         : tc_exp2(fmaf(s[m][n][e], a.scale_log2, -lse_t[qi]));
                if (masked) {
                    const int key = kw0 + 16 * m + g + 8 * (e >> 1), qc = q0 + qi;
                    if (!tc_visible(a, b, qc, key, tc_segment(a, b, qc)))
                        p = 0.0f;
                }
                pe[e] = p;
                dse[e] = p * (dp[m][n][e] - D_t[qi]);
            }
            const int row = 32 * wk + 16 * m + g, col = 32 * wq + 8 * n + 2 * t;
            uint32_t *p0 = (uint32_t *)(Ps + row * TC_SH_PITCH + col);
            uint32_t *d0 = (uint32_t *)(dSs + row * TC_SH_PITCH + col);
            p0[0] = tc_pack_bf16(pe[0], pe[1]);
            p0[8 * TC_SH_PITCH / 2] = tc_pack_bf16(pe[2], pe[3]);
            d0[0] = tc_pack_bf16(dse[0], dse[1]);
            d0[8 * TC_SH_PITCH / 2] = tc_pack_bf16(dse[2], dse[3]);
        }
}

/* Phase B for warp (wk, wf): dV += P^T dO and dK += dS^T Q for its 32 keys and the
 * HDMAX / 2 features from fbase = wf HDMAX / 2, 16 queries a k-step (A = P^T and dS^T rows
 * from Ps, dSs; B = dO and Q by ldmatrix.trans, two feature groups a load). */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_grads(float (*dka)[HDMAX / 16][4],
                                                float (*dva)[HDMAX / 16][4], const uint16_t *Ps,
                                                const uint16_t *dSs, const uint16_t *Qt,
                                                const uint16_t *dOt, int wk, int wf, int lane)
{
    constexpr int FD = HDMAX / 16; /* 8-feature groups of the half */
#pragma unroll
    for (int j = 0; j < TC_BQ / 16; j++) {
        uint32_t pa[2][4], sa[2][4];
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int off = tc_a_frag_row(32 * wk + 16 * m, lane, TC_SH_PITCH) + 16 * j;
            ft_ldmatrix<4, false>(pa[m], Ps + off);
            ft_ldmatrix<4, false>(sa[m], dSs + off);
        }
#pragma unroll
        for (int d = 0; d < FD; d += 2) {
            const int off = tc_b_pair_row(16 * j, wf * (HDMAX / 2) + 8 * d, lane, P);
            uint32_t of[4], qf[4];
            ft_ldmatrix<4, true>(of, dOt + off);
            ft_ldmatrix<4, true>(qf, Qt + off);
#pragma unroll
            for (int m = 0; m < 2; m++) {
                tc_mma_pair(dva[m][d], dva[m][d + 1], pa[m], of);
                tc_mma_pair(dka[m][d], dka[m][d + 1], sa[m], qf);
            }
        }
    }
}

/* Phase C (the one-pass backward) for warp (wq, wf): dQ += dS K for queries 32 wq .. of the
 * tile at q0 and the HDMAX / 4 features from wf HDMAX / 4, over the block's 128 keys (A =
 * dS by ldmatrix.trans of dSs, B = K rows by ldmatrix.trans), added unscaled to the head's
 * fp32 rows dq_head (dq's layout) with one 8-byte reduction a pair (tc_red_add2). */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_dq(float *dq_head, const uint16_t *dSs,
                                             const uint16_t *Ks, const TcArgs &a, int q0, int wq,
                                             int wf, int lane)
{
    constexpr int FQ = HDMAX / 32; /* 8-feature groups of the quarter */
    const int g = lane / 4, t = lane % 4, f0 = wf * (HDMAX / 4);
    float acc[2][FQ][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int d = 0; d < FQ; d++)
            acc[m][d][0] = acc[m][d][1] = acc[m][d][2] = acc[m][d][3] = 0.0f;
#pragma unroll
    for (int j = 0; j < 128 / 16; j++) {
        uint32_t af[2][4];
#pragma unroll
        for (int m = 0; m < 2; m++)
            ft_ldmatrix<4, true>(af[m], dSs + tc_bt_pair_row(16 * j, lane, TC_SH_PITCH) +
                                            32 * wq + 16 * m);
#pragma unroll
        for (int d = 0; d < FQ; d += 2) {
            uint32_t kf[4];
            ft_ldmatrix<4, true>(kf, Ks + tc_b_pair_row(16 * j, f0 + 8 * d, lane, P));
#pragma unroll
            for (int m = 0; m < 2; m++)
                tc_mma_pair(acc[m][d], acc[m][d + 1], af[m], kf);
        }
    }
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int d = 0; d < FQ; d++)
            tc_red_frag(dq_head, acc[m][d], q0 + 32 * wq + 16 * m + g, f0 + 8 * d + 2 * t, a);
}

/* The dQ pass in the shared layout (two-pass backward): a block of 8 warps takes 128
 * queries and walks the 64-key tiles; per tile
 *   phase A  warp (wq, wk) = (w % 4, w / 4) computes S and dP of queries 32 wq .. +31
 *            against keys 32 wk .. +31 of the tile and stores dS, rounded to bf16, into
 *            dSs ([128 queries][64 keys + pad]);
 *   barrier;
 *   phase B  warp (wq, wf) adds dS K to dQ of its 32 queries and the feature half wf.
 * The own dQ layout (16 queries a warp) reads each K and V fragment for one product;
 * here for two. Each dQ element is summed over the same key tiles, 16 keys a product, in
 * the same order: the same bits. */

/* Phase A for warp (wq, wk): its queries from qw0 (m-tile m's rows qw0 + 16 m + g and
 * + 8: lse2[m][r], D[m][r] and seg[m][r] are their lse in base 2, D and segment ids), kw0
 * the first of its 32 keys, cls its footprint's class; dS into dSs, zeros where cls is
 * TC_SKIP. */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_dq_scores(uint16_t *dSs, const uint16_t *Qs,
                                                    const uint16_t *dOs, const uint16_t *Kt,
                                                    const uint16_t *Vt, const TcArgs &a, int b,
                                                    int qw0, const float (*lse2)[2],
                                                    const float (*D)[2], const int (*seg)[2],
                                                    int kw0, int wq, int wk, int cls, int lane)
{
    const int g = lane / 4, t = lane % 4;
    float s[2][4][4] = {}, dp[2][4][4] = {}; /* zeros where the warp skips */
    if (cls != TC_SKIP)
        tc_shared_products<HDMAX, P>(s, dp, Qs, dOs, 32 * wq, Kt, Vt, 32 * wk, lane);
    const bool masked = cls == TC_MASKED;
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++) {
            float dse[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, key = kw0 + 8 * n + 2 * t + (e & 1);
                float p = cls == TC_SKIP ? 0.0f
                                         : tc_exp2(fmaf(s[m][n][e], a.scale_log2, -lse2[m][r]));
                if (masked && !tc_visible(a, b, qw0 + 16 * m + g + 8 * r, key, seg[m][r]))
                    p = 0.0f;
                dse[e] = p * (dp[m][n][e] - D[m][r]);
            }
            const int row = 32 * wq + 16 * m + g, col = 32 * wk + 8 * n + 2 * t;
            uint32_t *d0 = (uint32_t *)(dSs + row * TC_SH_PITCH + col);
            d0[0] = tc_pack_bf16(dse[0], dse[1]);
            d0[8 * TC_SH_PITCH / 2] = tc_pack_bf16(dse[2], dse[3]);
        }
}

/* Phase B for warp (wq, wf): dQ += dS K for its 32 queries and the HDMAX / 2 features from
 * wf HDMAX / 2, 16 keys a k-step (A = dS rows from dSs, B = K rows by ldmatrix.trans). */
template <int HDMAX, int P>
__device__ __forceinline__ void tc_shared_dq_grads(float (*dqa)[HDMAX / 16][4],
                                                   const uint16_t *dSs, const uint16_t *Kt,
                                                   int wq, int wf, int lane)
{
    constexpr int FD = HDMAX / 16;
#pragma unroll
    for (int j = 0; j < 64 / 16; j++) {
        uint32_t sa[2][4];
#pragma unroll
        for (int m = 0; m < 2; m++)
            ft_ldmatrix<4, false>(sa[m], dSs + tc_a_frag_row(32 * wq + 16 * m, lane, TC_SH_PITCH) +
                                             16 * j);
#pragma unroll
        for (int d = 0; d < FD; d += 2) {
            uint32_t kf[4];
            ft_ldmatrix<4, true>(kf, Kt + tc_b_pair_row(16 * j, wf * (HDMAX / 2) + 8 * d, lane, P));
#pragma unroll
            for (int m = 0; m < 2; m++)
                tc_mma_pair(dqa[m][d], dqa[m][d + 1], sa[m], kf);
        }
    }
}

#endif
