/* Pieces of the tensor-core attention backward shared by its passes
 * (cuda_attention_tc_bwd.cu): the tile geometry and shared-memory budgets (TcBwdCfg), the
 * score products of a warp's 16 rows, and the one-pass backward's dS^T store and dQ
 * atomics. */
#ifndef FT_CUDA_ATTENTION_TC_BWD_CUH
#define FT_CUDA_ATTENTION_TC_BWD_CUH

#include "cuda_attention_tc_bwd_shared.cuh"

#define TC_BK 64 /* keys per tile of the dQ pass */

/* The two passes on Hopper's warpgroup MMA (cuda_attention_wgmma_bwd.cu), for the shapes
 * ft_cuda_attention_tc_bwd_wgmma (cuda_internal.h) accepts; D already computed. */
cudaError_t tc_bwd_wgmma(float *dq, float *dk, float *dv, const uint16_t *dout, const float *lse,
                         const float *Dv, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                         const TcArgs &a, ft_attn_shape s, cudaStream_t st);
cudaError_t tc_bwd_wgmma(ft_bf16 *dq, ft_bf16 *dk, ft_bf16 *dv, const uint16_t *dout,
                         const float *lse, const float *Dv, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st);

/* Register budget (255 per thread). A dK/dV warp holds its 16 keys' dK and dV
 * accumulators, HDMAX/8 x 4 fp32 each (64 registers at head_dim 128, 128 at 256), the
 * 16 x 64 P and dS tiles (64) and, where they fit, its K and V A fragments (HDMAX/4).
 *  - head_dim <= 64: everything in registers (no spill);
 *  - head_dim 128: K and V fragments reloaded from the K/V tile (it stays in shared
 *    memory for the whole pass) at each k-step instead of held: 64 registers fewer;
 *  - head_dim 256: that, and the accumulators split: the two warps of a key group own
 *    one half of the head's features each (DSPLIT = 2), so a block holds 32 keys. Each
 *    warp of the pair computes the group's whole S^T and dP^T (the tensor-core work of
 *    those two products doubles, the rest is unchanged) and no data crosses warps.
 * The dQ kernel at head_dim 256 likewise reloads its Q and dO fragments. P and dS are
 * rounded to bf16 pairs (one cvt.rn.bf16x2 each) as soon as a key group's are made, so
 * their fp32 values die before the products that use them: ptxas -v (CUDA 13, sm_80 and
 * sm_90) finds no spill in any backward kernel, the one-pass dK/dV kernel included
 * (rounding them a k-step at a time before the products, with integer arithmetic,
 * spilled 12 to 76 bytes a thread at head_dim 128 and 256), and 24 fewer registers at
 * head_dim 64 (200: 224 before); but for the 128-key block's two-pass dK/dV kernel at
 * head_dim 128 on sm_90, 24-32 bytes of loop-invariant scalars. */
template <int HDMAX, int WARPS = TC_WARPS>
struct TcBwdCfg {
    static constexpr int P = HDMAX + TC_PAD;
    static constexpr int DSPLIT = HDMAX > 128 ? 2 : 1;     /* warps sharing a key group */
    static constexpr int BKV = 16 * WARPS / DSPLIT;        /* keys per dK/dV block */
    static constexpr bool KV_IN_REGS = HDMAX <= 64;        /* dK/dV: K, V fragments held */
    static constexpr bool QO_IN_REGS = HDMAX <= 128;       /* dQ: Q, dO fragments held */
    /* Buffers of the walked tiles (dQ: K and V; dK/dV: Q, dO, lse and D): two (the next
     * tile in flight while the current one is used) where they fit sm_80's 163 KiB of
     * shared memory, one at head_dim 256 */
    static constexpr int STAGES = HDMAX <= 128 ? 2 : 1;
    /* dK/dV: the K and V tiles (BKV rows), STAGES Q and dO tiles, per-query lse and D;
     * dQ: the Q and dO tiles and STAGES K and V tiles (64 rows each) */
    static constexpr size_t smem_dkdv = (size_t)(2 * BKV + 2 * STAGES * TC_BQ) * P *
                                            sizeof(uint16_t) +
                                        2 * STAGES * TC_BQ * sizeof(float);
    static constexpr size_t smem_dq =
        (size_t)(2 * TC_BQ + 2 * STAGES * TC_BK) * P * sizeof(uint16_t);
    /* the one-pass backward's dK/dV kernel: also dS^T, [BKV][TC_BQ + TC_PAD] bf16 */
    static constexpr size_t smem_fused = smem_dkdv + (size_t)BKV * (TC_BQ + TC_PAD) * 2;
    /* the shared layout (cuda_attention_tc_bwd_shared.cuh), one pass or two: P^T and dS^T;
     * its dQ pass: Q and dO tiles of 128 queries, STAGES K and V tiles, dS */
    static constexpr size_t smem_shared = smem_dkdv + 2 * (size_t)BKV * TC_SH_PITCH * 2;
    static constexpr size_t smem_dq_shared =
        (size_t)(2 * 128 + 2 * STAGES * TC_BK) * P * sizeof(uint16_t) +
        (size_t)128 * TC_SH_PITCH * 2;
};

/* k-step j of the A operand from accumulator rows already rounded to bf16 pairs
 * (x[n][0]: row g, x[n][1]: row g + 8 of 8-column group n). */
#define TC_PACKED_A(x, j) {x[2 * (j)][0], x[2 * (j)][1], x[2 * (j) + 1][0], x[2 * (j) + 1][1]}

/* One k-step of the two score products of a warp's 16 rows against 16 columns (groups n,
 * n+1): x += A1 X^T, y += A2 Y^T, with X and Y the row-major token tiles in shared memory
 * (their k-step ks as "col" B fragments, two groups per ldmatrix.x4). dK/dV: rows keys,
 * A1 = K, A2 = V, X = Q, Y = dO (S^T, dP^T); dQ: rows queries, A1 = Q, A2 = dO, X = K,
 * Y = V (S, dP). */
template <int HDMAX>
__device__ __forceinline__ void tc_bwd_st_step(float (*x)[4], float (*y)[4], const uint32_t a1[4],
                                               const uint32_t a2[4], const uint16_t *X,
                                               const uint16_t *Y, int n, int ks, int lane)
{
    int off = tc_bt_pair_row(n * 8, lane, TcBwdCfg<HDMAX>::P) + ks * 16;
    uint32_t xf[4], yf[4];
    ft_ldmatrix<4, false>(xf, X + off);
    ft_ldmatrix<4, false>(yf, Y + off);
    tc_mma_pair(x[n], x[n + 1], a1, xf);
    tc_mma_pair(y[n], y[n + 1], a2, yf);
}

/* Both score products of N column groups over all k-steps, the warp's row fragments
 * reloaded from shared memory (A1, A2 at offset off) once per k-step, for head sizes
 * whose fragments do not fit in registers. */
template <int HDMAX, int N>
__device__ __forceinline__ void tc_bwd_st_reloaded(float (&x)[N][4], float (&y)[N][4],
                                                   const uint16_t *A1, const uint16_t *A2,
                                                   int off, const uint16_t *X, const uint16_t *Y,
                                                   int lane)
{
#pragma unroll
    for (int n = 0; n < N; n++)
        for (int e = 0; e < 4; e++)
            x[n][e] = y[n][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HDMAX / 16; ks++) {
        uint32_t f1[4], f2[4];
        ft_ldmatrix<4, false>(f1, A1 + off + ks * 16);
        ft_ldmatrix<4, false>(f2, A2 + off + ks * 16);
#pragma unroll
        for (int n = 0; n < N; n += 2)
            tc_bwd_st_step<HDMAX>(x, y, f1, f2, X, Y, n, ks, lane);
    }
}

/* Both score products of column groups n, n+1 over all k-steps, the row fragments held
 * in registers (a1, a2: one per k-step). */
template <int HDMAX>
__device__ __forceinline__ void tc_bwd_st_held(float (*x)[4], float (*y)[4],
                                               uint32_t (*a1)[4], uint32_t (*a2)[4],
                                               const uint16_t *X, const uint16_t *Y, int n,
                                               int lane)
{
    for (int e = 0; e < 4; e++)
        x[n][e] = y[n][e] = x[n + 1][e] = y[n + 1][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HDMAX / 16; ks++)
        tc_bwd_st_step<HDMAX>(x, y, a1[ks], a2[ks], X, Y, n, ks, lane);
}

/* The one-pass backward (FUSED, FTMPI_ATTENTION_NONDETERMINISTIC=1, head_dim <= 128):
 * the dK/dV kernel also adds each tile pair's dQ contribution dS K to an fp32 accumulator
 * with atomics, as FlashAttention-2 does, so S and dP are computed once: five tile
 * products per pair instead of seven. The order of the atomic additions varies from run
 * to run, and so do the last bits of dQ. dS^T goes through shared memory (dsT, [BKV keys]
 * [TC_BQ queries + pad], bf16 as it enters the tensor cores) because the product needs dS
 * with queries as rows, the transpose of the warps' accumulator tiles. */
#define TC_DS_PITCH (TC_BQ + TC_PAD)

/* Stores this warp's 16 x 64 tile of dS^T (rows kgrp*16 + g, + 8; accumulator layout),
 * rounded to bf16, into dsT; zeros where ds is NULL (a skipped pair). */
template <int NQ>
__device__ __forceinline__ void tc_store_ds_t(uint16_t *dsT, const uint32_t (*dsk)[2], int kgrp,
                                              int lane)
{
    const int g = lane / 4, t = lane % 4;
    uint32_t *row0 = (uint32_t *)(dsT + (kgrp * 16 + g) * TC_DS_PITCH);
    uint32_t *row1 = (uint32_t *)(dsT + (kgrp * 16 + g + 8) * TC_DS_PITCH);
#pragma unroll
    for (int n = 0; n < NQ; n++) {
        row0[(n * 8 + 2 * t) / 2] = dsk ? dsk[n][0] : 0u;
        row1[(n * 8 + 2 * t) / 2] = dsk ? dsk[n][1] : 0u;
    }
}

/* dQ += dS K for 16 queries of the tile over the block's BKV keys: A = dS from dsT by
 * ldmatrix.trans (the 8 x 8 blocks of dS^T transposed on the way in), B = K rows
 * (row-major K x N, ldmatrix.trans); added unscaled to dq_acc (the head's fp32 rows, dq's
 * layout). The tile's 64 x HDMAX block of dQ is split over the block's warps: warp w takes
 * the query rows 16 (w % 4) .. and, with 8 warps, half the features (w / 4). */
template <int HDMAX, int WARPS>
__device__ __forceinline__ void tc_dq_atomic(float *dq_acc, const uint16_t *dsT,
                                             const uint16_t *Ks, const TcArgs &a, int q0,
                                             int warp, int lane)
{
    constexpr int P = TcBwdCfg<HDMAX, WARPS>::P, BKV = TcBwdCfg<HDMAX, WARPS>::BKV;
    constexpr int FSPLIT = WARPS * 16 / TC_BQ, DQ = HDMAX / 8 / FSPLIT; /* feature groups */
    static_assert(FSPLIT >= 1 && DQ % 2 == 0, "dQ split: whole pairs of feature groups");
    const int g = lane / 4, t = lane % 4, mrow = 16 * (warp % (TC_BQ / 16));
    const int dbase = (warp / (TC_BQ / 16)) * DQ;
    uint32_t af[BKV / 16][4];
#pragma unroll
    for (int j = 0; j < BKV / 16; j++)
        ft_ldmatrix<4, true>(af[j], dsT + tc_bt_pair_row(j * 16, lane, TC_DS_PITCH) + mrow);
    const int r0 = q0 + mrow + g;
#pragma unroll
    for (int d = dbase; d < dbase + DQ; d += 2) {
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
        for (int j = 0; j < BKV / 16; j++) {
            uint32_t kf[4];
            ft_ldmatrix<4, true>(kf, Ks + tc_b_pair_row(j * 16, d * 8, lane, P));
            tc_mma_pair(acc[0], acc[1], af[j], kf);
        }
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++)
            tc_red_frag(dq_acc, acc[h2], r0, (d + h2) * 8 + 2 * t, a);
    }
}

/* The dK/dV passes' per-query statistics of query rows [q0, q0 + qn) (row: the head's
 * first row in lse and D) into BQ shared entries each, zeros past qn: lse in base 2, as
 * the scores' exponent takes it, and D. Plain loads by the block's THREADS threads, read
 * after the next barrier. */
template <int BQ, int THREADS>
__device__ __forceinline__ void tc_stage_query_stats(float *lse_s, float *D_s, const float *lse,
                                                     const float *Dv, size_t row, int q0, int qn)
{
    for (int i = threadIdx.x; i < BQ; i += THREADS) {
        lse_s[i] = i < qn ? lse[row + q0 + i] * TC_LOG2E : 0.0f;
        D_s[i] = i < qn ? Dv[row + q0 + i] : 0.0f;
    }
}

/* Stores a warp's accumulator tiles acc[m][d] times scale, rounded once to dst's storage:
 * m-tile m's rows row0 + 16 m + g and + 8, 8-feature group d's columns f0 + 8 d + 2 t and
 * + 1, of the head's rows dst (stride elements apart); rows past the sequence and
 * columns past the head left out. */
template <int MT, int DT, typename OT>
__device__ __forceinline__ void tc_store_tiles(OT *dst, size_t stride, const float (*acc)[DT][4],
                                               float scale, int row0, int f0, const TcArgs &a,
                                               int lane)
{
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int d = 0; d < DT; d++) {
            const int c = f0 + d * 8 + 2 * t;
            if (c >= a.hd)
                continue;
            for (int e = 0; e < 4; e++) {
                const int row = row0 + 16 * m + g + 8 * (e >> 1);
                if (row < a.seq)
                    ft_st(dst, (size_t)row * stride + c + (e & 1), acc[m][d][e] * scale);
            }
        }
}

#endif
