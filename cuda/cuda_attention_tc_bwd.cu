/* Flash attention backward on tensor cores (sm_80+): bf16 q, k, v, dO; fp32 O, lse and
 * gradients. Deterministic, no atomics, the split of cuda_attention.cu's fp32 backward:
 *
 *   D_i   = dO_i . O_i                                   (tc_bwd_dot_kernel)
 *   p_ij  = exp(s_ij - lse_i),  dP_ij = dO_i . v_j,  dS_ij = p_ij (dP_ij - D_i)
 *   dV_j  = sum_i p_ij dO_i,  dK_j = scale sum_i dS_ij q_i   (tc_bwd_dkdv_kernel: one
 *           block per (64-key tile, kv head, batch row; 128 keys and 8 warps with
 *           FTMPI_TC_BWD_KEYS=128 or, in FlashAttention-2's warp layout,
 *           FTMPI_TC_BWD_LAYOUT=shared: cuda_attention_tc_bwd_shared.cuh; 32 keys and
 *           each warp half the features at head_dim 256, TcBwdCfg); warp w owns keys
 *           16w..16w+15 and
 *           walks the query tiles from the diagonal to the last one whose window reaches
 *           its keys, of every query head of its GQA group, so each dK/dV element is
 *           summed by one thread in a fixed order)
 *   dQ_i  = scale sum_j dS_ij k_j                          (tc_bwd_dq_kernel: one block
 *           per (64-query tile, head, batch row); warp w owns 16 query rows; it walks the
 *           key tiles from the first inside the window to the diagonal, the next one in
 *           flight (cp.async, double buffered) while the current one is used)
 * Both passes skip tile pairs whose documents cannot meet (tc_segments_meet): a skipped
 * pair would add exact zeros, so the fixed summation order, and every bit, is kept.
 *
 * Every product is an m16n8k16 mma (cuda_mma.cuh). The dK/dV kernel computes the
 * transposed tiles S^T = K Q^T and dP^T = V dO^T, so that its rows are its own keys and the
 * probabilities repack, as in the forward, from accumulator registers into the A operand of
 * dV += P^T dO and dK += dS^T Q. B operands come from shared memory by ldmatrix: a
 * row-major token tile is the "col" layout of its transpose (plain ldmatrix, for Q^T,
 * dO^T, K^T, V^T) and the row-major K x N layout itself (ldmatrix.trans, for dO, Q, K).
 * B fragments are loaded two 8-column groups per ldmatrix.x4. Each warp classifies its
 * part of a tile pair (tc_pair_class: its 16 keys against the 64 queries, or its 16
 * queries against the 64 keys): skipped if nothing in it is visible, the mask evaluated
 * per element only where part of it is not. Tiles are staged with cp.async and double
 * buffered up to head_dim 128, the next tile in flight while the current one is used (the
 * dQ pass's key tiles, the dK/dV pass's query tiles; at 256 two buffers would not fit
 * sm_80's shared memory). P and dS enter the tensor cores rounded
 * to bf16; everything else stays fp32. */
#include "cuda_attention_tc_bwd_shared.cuh"

#include <stdlib.h>
#include <string.h>

#define TC_BK 64

/* D_i = sum_d dO_id O_id, one warp per (batch row, head, token); D is [batch, heads, seq].
 * OT: the storage of O (and of dq, dk, dv below), float or ft_bf16. */
template <typename OT>
__global__ void tc_bwd_dot_kernel(float *__restrict__ Dv, const uint16_t *__restrict__ dout,
                                  const OT *__restrict__ out, TcArgs a, int heads, size_t rows)
{
    const int lane = threadIdx.x % 32;
    const size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    /* the loop bound is the same for every lane of a warp: the shuffles see full warps */
    for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        int t = (int)(r % a.seq), h = (int)((r / a.seq) % heads);
        size_t b = r / ((size_t)a.seq * heads);
        size_t base = (b * a.seq + t) * a.q_stride + (size_t)h * a.hd;
        float sum = 0.0f;
        for (int d = lane; d < a.hd; d += 32)
            sum = fmaf(ft_f32_from_bf16(dout[base + d]), ft_ld(out, base + d), sum);
        sum = ft_warp_sum(sum);
        if (lane == 0)
            Dv[r] = sum;
    }
}

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
 * head_dim 64 (200: 224 before). */
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
    const int r0 = q0 + mrow + g, r1 = r0 + 8;
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
        for (int h2 = 0; h2 < 2; h2++) {
            const int c = (d + h2) * 8 + 2 * t;
            if (c >= a.hd)
                continue;
            /* c even, rows of an even number of floats: 8-byte aligned pairs */
            if (r0 < a.seq)
                tc_red_add2(dq_acc + (size_t)r0 * a.q_stride + c, acc[h2][0], acc[h2][1]);
            if (r1 < a.seq)
                tc_red_add2(dq_acc + (size_t)r1 * a.q_stride + c, acc[h2][2], acc[h2][3]);
        }
    }
}

/* FUSED: the one-pass backward above (dq_acc non-NULL); else dq_acc is unused. WARPS: 4
 * (64 keys a block) or 8 (128 keys, head_dim <= 128: FlashAttention-2's backward tile,
 * half the staging of Q and dO and, one-pass, half the dQ atomics per product). SHARED
 * (8 warps): the shared layout of cuda_attention_tc_bwd_shared.cuh instead of each warp
 * owning 16 keys throughout. */
template <int HDMAX, bool FUSED, typename OT, int WARPS, bool SHARED>
__global__ void __launch_bounds__(WARPS * 32)
    tc_bwd_dkdv_kernel(OT *__restrict__ dk, OT *__restrict__ dv, float *__restrict__ dq_acc,
                       const uint16_t *__restrict__ dout, const float *__restrict__ lse,
                       const float *__restrict__ Dv, const uint16_t *__restrict__ q,
                       const uint16_t *__restrict__ k, const uint16_t *__restrict__ v, TcArgs a,
                       int heads)
{
    typedef TcBwdCfg<HDMAX, WARPS> C;
    static_assert(!FUSED || C::DSPLIT == 1, "the one-pass backward needs one warp per key group");
    static_assert(WARPS == TC_WARPS || C::DSPLIT == 1, "8 warps: head_dim <= 128");
    static_assert(!SHARED || WARPS == 8, "the shared layout is for 8 warps");
    constexpr int THREADS = WARPS * 32;
    constexpr int P = C::P, KS = HDMAX / 16, NQ = TC_BQ / 8, BKV = C::BKV;
    /* 8-feature groups of dK/dV this warp owns, for MK m-tiles of 16 keys */
    constexpr int DT = SHARED ? HDMAX / 16 : HDMAX / 8 / C::DSPLIT, MK = SHARED ? 2 : 1;
    constexpr bool KV_IN_REGS = C::KV_IN_REGS && !SHARED;
    FT_DYNAMIC_SMEM(uint16_t, smem);
    constexpr int STAGES = C::STAGES;
    uint16_t *Ks = smem, *Vs = Ks + BKV * P;                          /* [BKV][P] each */
    uint16_t *Qs = Vs + BKV * P, *dOs = Qs + STAGES * TC_BQ * P;      /* [STAGES][BQ][P] */
    float *lse_s = (float *)(dOs + STAGES * TC_BQ * P), *D_s = lse_s + STAGES * TC_BQ;
    uint16_t *dsT = (uint16_t *)(D_s + STAGES * TC_BQ); /* FUSED: [BKV][TC_DS_PITCH] */
    uint16_t *Ps = dsT, *dSs = Ps + BKV * TC_SH_PITCH;  /* SHARED: [BKV][TC_SH_PITCH] each */

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int kgrp = warp / C::DSPLIT, dbase = (warp % C::DSPLIT) * DT; /* keys, features */
    const int k0 = (int)blockIdx.x * BKV, kn = min(BKV, a.seq - k0);
    const int hk = blockIdx.y, b = blockIdx.z;
    const uint16_t *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const uint16_t *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    tc_stage_kv<HDMAX, BKV, THREADS>(Ks, Vs, kb, vb, a, (int)blockIdx.x);
    ft_cp_async_commit();
    ft_cp_async_wait<0>();
    __syncthreads();
    const int kv_off = (kgrp * 16 + lane % 16) * P + 8 * (lane / 16); /* A fragment rows */
    uint32_t ka[KV_IN_REGS ? KS : 1][4], va[KV_IN_REGS ? KS : 1][4];
    if constexpr (KV_IN_REGS) {
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            ft_ldmatrix<4, false>(ka[ks], Ks + kv_off + ks * 16);
            ft_ldmatrix<4, false>(va[ks], Vs + kv_off + ks * 16);
        }
    }
    const int kr0 = k0 + kgrp * 16 + g, kr1 = kr0 + 8; /* this lane's two keys */
    const int2 kr = tc_segment_range(a, b, k0, kn);
    /* this warp's keys (16; 32 in the shared layout, wk = warp % 4) and their documents */
    const int wkeys = SHARED ? 32 : 16, kw0 = k0 + (SHARED ? 32 * (warp % 4) : kgrp * 16);
    const int2 kwr = tc_warp_segment_range(a, b, kw0, min(wkeys, a.seq - kw0));
    float dk_acc[MK][DT][4], dv_acc[MK][DT][4];
    float(&dka)[DT][4] = dk_acc[0], (&dva)[DT][4] = dv_acc[0]; /* the own layout's one m-tile */
#pragma unroll
    for (int m = 0; m < MK; m++)
#pragma unroll
        for (int d = 0; d < DT; d++)
            for (int e = 0; e < 4; e++)
                dk_acc[m][d][e] = dv_acc[m][d][e] = 0.0f;

    /* The (query head of the group, query tile) pairs the block visits, in order: per
     * head, the query tiles from the one holding k0 (queries before it see none of the
     * keys) up to the first past the window, those meeting the keys' documents. */
    const int nqt = (a.seq + TC_BQ - 1) / TC_BQ;
    auto next_pair = [&](int &gi, int &qt) -> bool {
        for (qt++; gi < a.group;) {
            const int q0 = qt * TC_BQ;
            if (qt >= nqt || tc_before_window(a, q0, k0, kn)) { /* later tiles: further out */
                gi++;
                qt = k0 / TC_BQ;
            } else if (tc_segments_meet(a, b, kr, q0, min(TC_BQ, a.seq - q0))) {
                return true;
            } else {
                qt++;
            }
        }
        return false;
    };
    /* Stages query tile qt of head gi into buffer buf: Q and dO by cp.async, lse (in base
     * 2) and D by plain loads (read after the next barrier). */
    auto stage_queries = [&](int buf, int gi, int qt) {
        const int h = hk * a.group + gi, q0 = qt * TC_BQ, qn = min(TC_BQ, a.seq - q0);
        const size_t tok = (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
        const size_t row = ((size_t)b * heads + h) * a.seq;
        tc_stage<HDMAX, TC_BQ, THREADS>(Qs + buf * TC_BQ * P, q + tok, a.q_stride, q0, qn, a.hd);
        tc_stage<HDMAX, TC_BQ, THREADS>(dOs + buf * TC_BQ * P, dout + tok, a.q_stride, q0, qn,
                                        a.hd);
        for (int i = threadIdx.x; i < TC_BQ; i += THREADS) {
            lse_s[buf * TC_BQ + i] = i < qn ? lse[row + q0 + i] * TC_LOG2E : 0.0f;
            D_s[buf * TC_BQ + i] = i < qn ? Dv[row + q0 + i] : 0.0f;
        }
    };
    int gi = 0, qt = k0 / TC_BQ - 1;
    bool have = next_pair(gi, qt);
    if (STAGES == 2 && have)
        stage_queries(0, gi, qt);
    ft_cp_async_commit();
    for (int it = 0; have; it++) { /* it: visited pairs so far, (gi, qt): this one */
        const int q0 = qt * TC_BQ, qn = min(TC_BQ, a.seq - q0), buf = STAGES == 2 ? it & 1 : 0;
        const int h = hk * a.group + gi;
        if constexpr (STAGES == 1) {
            __syncthreads(); /* the previous query tile is no longer read */
            stage_queries(0, gi, qt);
            ft_cp_async_commit();
        }
        ft_cp_async_wait<0>();
        __syncthreads(); /* tile visible to all; everyone is done with the previous one */
        TC_COUNT_TILE(1);
        have = next_pair(gi, qt);
        if constexpr (STAGES == 2) { /* prefetch the next pair's tile into the other buffer */
            if (have)
                stage_queries(buf ^ 1, gi, qt);
            ft_cp_async_commit();
        }
        const uint16_t *Qt = Qs + buf * TC_BQ * P, *dOt = dOs + buf * TC_BQ * P;
        const float *lse_t = lse_s + buf * TC_BQ, *D_t = D_s + buf * TC_BQ;
        /* warp-uniform: this warp's keys against the query tile (tc_pair_class) */
        const int2 qr = tc_segment_range(a, b, q0, qn);
        const int cls = tc_pair_class(a, q0, TC_BQ, qr, kw0, wkeys, kwr);
        if constexpr (SHARED) {
            /* phase A: keys 32 wk .. against queries 32 wq .. of the tile */
            const int wk = warp % 4, wq = warp / 4, qw0 = q0 + 32 * wq, qwn = min(32, a.seq - qw0);
            const int cls_a = qwn > 0 ? tc_pair_class(a, qw0, 32, tc_segment_range(a, b, qw0, qwn),
                                                      kw0, 32, kwr)
                                      : TC_SKIP;
            if (cls_a != TC_SKIP)
                TC_COUNT_WARP_TILE(5, cls_a == TC_MASKED);
            tc_shared_scores<HDMAX, P>(Ps, dSs, Ks, Vs, Qt, dOt, lse_t, D_t, a, b, q0, kw0, wk, wq,
                                       cls_a, lane);
            __syncthreads(); /* P^T and dS^T of the whole tile pair in Ps and dSs */
            /* phase B: the same keys, feature half warp / 4; nothing to add where none of
             * the keys sees any query of the tile */
            if (cls != TC_SKIP)
                tc_shared_grads<HDMAX, P>(dk_acc, dv_acc, Ps, dSs, Qt, dOt, wk, warp / 4, lane);
            if constexpr (FUSED) /* phase C */
                tc_shared_dq<HDMAX, P>(dq_acc + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd,
                                       dSs, Ks, a, q0, warp / 4, warp % 4, lane);
            continue; /* the next tile's barrier orders these reads before its stores */
        }
        if (cls != TC_SKIP) {
            const bool masked = cls == TC_MASKED;
            TC_COUNT_WARP_TILE(5, masked);

            /* S^T = K Q^T and dP^T = V dO^T: this warp's 16 keys x 64 queries */
            /* Held fragments: each pair of query groups is computed and masked in turn (the
             * order ptxas allocates best); reloaded ones: k-steps outer, each loaded once. */
            float p[NQ][4], ds[NQ][4];
            uint32_t pk[NQ][2], dsk[NQ][2]; /* p and ds as bf16 pairs, rows g and g + 8 */
            if constexpr (!KV_IN_REGS)
                tc_bwd_st_reloaded<HDMAX>(p, ds, Ks, Vs, kv_off, Qt, dOt, lane);
#pragma unroll
            for (int n = 0; n < NQ; n++) {
                if constexpr (KV_IN_REGS)
                    if (n % 2 == 0)
                        tc_bwd_st_held<HDMAX>(p, ds, ka, va, Qt, dOt, n, lane);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int qi = n * 8 + 2 * t + (e & 1);
                    float pe = tc_exp2(fmaf(p[n][e], a.scale_log2, -lse_t[qi]));
                    if (masked) {
                        int qc = q0 + qi, key = e < 2 ? kr0 : kr1;
                        if (!tc_visible(a, b, qc, key, tc_segment(a, b, qc)))
                            pe = 0.0f;
                    }
                    p[n][e] = pe;
                    ds[n][e] = pe * (ds[n][e] - D_t[qi]);
                }
                /* rounded to bf16 pairs at once: the fp32 values die here */
                pk[n][0] = tc_pack_bf16(p[n][0], p[n][1]);
                pk[n][1] = tc_pack_bf16(p[n][2], p[n][3]);
                dsk[n][0] = tc_pack_bf16(ds[n][0], ds[n][1]);
                dsk[n][1] = tc_pack_bf16(ds[n][2], ds[n][3]);
            }
            /* dV += P^T dO, dK += dS^T Q: 16 queries per k-step, two feature groups per
             * ldmatrix.x4.trans */
#pragma unroll
            for (int j = 0; j < NQ / 2; j++) {
                uint32_t pa[4] = TC_PACKED_A(pk, j), sa[4] = TC_PACKED_A(dsk, j);
#pragma unroll
                for (int d = 0; d < DT; d += 2) {
                    int off = tc_b_pair_row(j * 16, (dbase + d) * 8, lane, P);
                    uint32_t of[4], qf[4];
                    ft_ldmatrix<4, true>(of, dOt + off);
                    ft_ldmatrix<4, true>(qf, Qt + off);
                    tc_mma_pair(dva[d], dva[d + 1], pa, of);
                    tc_mma_pair(dka[d], dka[d + 1], sa, qf);
                }
            }
            if constexpr (FUSED)
                tc_store_ds_t<NQ>(dsT, dsk, kgrp, lane);
        } else {
            if constexpr (FUSED)
                tc_store_ds_t<NQ>(dsT, NULL, kgrp, lane);
        }
        if constexpr (FUSED) {
            __syncthreads(); /* dS^T of all the block's keys in dsT */
            float *dq_head = dq_acc + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
            tc_dq_atomic<HDMAX, WARPS>(dq_head, dsT, Ks, a, q0, warp, lane);
        }
    }
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */
    const float scale = a.scale_log2 / TC_LOG2E;
    OT *dkb = dk + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    OT *dvb = dv + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    /* this warp's rows: m-tile m's keys from key0 + 16 m, features from f0 */
    const int key0 = SHARED ? kw0 : kr0 - g, f0 = SHARED ? (warp / 4) * (HDMAX / 2) : dbase * 8;
#pragma unroll
    for (int m = 0; m < MK; m++)
#pragma unroll
        for (int d = 0; d < DT; d++) {
            int c = f0 + d * 8 + 2 * t;
            if (c >= a.hd)
                continue;
            for (int e = 0; e < 4; e++) {
                int key = key0 + 16 * m + g + 8 * (e >> 1);
                if (key < a.seq) {
                    ft_st(dkb, (size_t)key * a.kv_stride + c + (e & 1), dk_acc[m][d][e] * scale);
                    ft_st(dvb, (size_t)key * a.kv_stride + c + (e & 1), dv_acc[m][d][e]);
                }
            }
        }
}

/* SHARED: the shared layout (cuda_attention_tc_bwd_shared.cuh: 8 warps, 128 queries a
 * block); else 4 warps of 16 queries each, 64 a block */
template <int HDMAX, typename OT, bool SHARED>
__global__ void __launch_bounds__(SHARED ? 256 : TC_THREADS)
    tc_bwd_dq_kernel(OT *__restrict__ dq, const uint16_t *__restrict__ dout,
                     const float *__restrict__ lse, const float *__restrict__ Dv,
                     const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                     const uint16_t *__restrict__ v, TcArgs a, int heads)
{
    static_assert(!SHARED || HDMAX <= 128, "the shared layout: head_dim <= 128");
    constexpr int P = TcBwdCfg<HDMAX>::P, KS = HDMAX / 16, NK = TC_BK / 8;
    constexpr int THREADS = SHARED ? 256 : TC_THREADS, BQ = SHARED ? 128 : TC_BQ;
    /* 8-feature groups of dQ a warp owns, for MQ m-tiles of 16 queries */
    constexpr int DT = SHARED ? HDMAX / 16 : HDMAX / 8, MQ = SHARED ? 2 : 1;
    constexpr int STAGES = TcBwdCfg<HDMAX>::STAGES;
    FT_DYNAMIC_SMEM(uint16_t, smem);
    uint16_t *Qs = smem, *dOs = Qs + BQ * P;                       /* [BQ][P] each */
    uint16_t *Ks = dOs + BQ * P, *Vs = Ks + STAGES * TC_BK * P;   /* [STAGES][BK][P] each */
    uint16_t *dSs = Vs + STAGES * TC_BK * P; /* SHARED: [BQ][TC_SH_PITCH] */

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / a.group, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const uint16_t *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    const uint16_t *ob = dout + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    const uint16_t *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const uint16_t *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    /* key tiles [first in the window, diagonal], those meeting the query tile's documents */
    const int nkt = (q0 + qn - 1) / TC_BK + 1;
    const int2 qr = tc_segment_range(a, b, q0, qn);
    int kt = tc_next_key_tile<TC_BK>(a, b, qr, tc_first_key_tile(a, q0, TC_BK) - 1, nkt);
    tc_stage<HDMAX, BQ, THREADS>(Qs, qb, a.q_stride, q0, qn, a.hd);
    tc_stage<HDMAX, BQ, THREADS>(dOs, ob, a.q_stride, q0, qn, a.hd);
    if (STAGES == 2 && kt < nkt)
        tc_stage_kv<HDMAX, TC_BK, THREADS>(Ks, Vs, kb, vb, a, kt);
    ft_cp_async_commit();
    ft_cp_async_wait<0>();
    __syncthreads();
    constexpr bool QO_IN_REGS = TcBwdCfg<HDMAX>::QO_IN_REGS && !SHARED;
    const int qo_off = (warp * 16 + lane % 16) * P + 8 * (lane / 16); /* A fragment rows */
    uint32_t qa[QO_IN_REGS ? KS : 1][4], oa[QO_IN_REGS ? KS : 1][4];
    if constexpr (QO_IN_REGS) {
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            ft_ldmatrix<4, false>(qa[ks], Qs + qo_off + ks * 16);
            ft_ldmatrix<4, false>(oa[ks], dOs + qo_off + ks * 16);
        }
    }
    /* this warp's queries (16; 32 in the shared layout, wq = warp % 4) and their
     * documents; this lane's rows (m-tile m: g and g + 8), their lse (base 2), D and ids */
    const int wrows = SHARED ? 32 : 16, qw0 = q0 + (SHARED ? 32 * (warp % 4) : 16 * warp);
    const int2 qwr = tc_warp_segment_range(a, b, qw0, min(wrows, a.seq - qw0));
    const size_t row_base = ((size_t)b * heads + h) * a.seq;
    const int r0 = qw0 + g, r1 = r0 + 8; /* the own layout's rows */
    const int seg0 = tc_segment(a, b, r0), seg1 = tc_segment(a, b, r1);
    const float lse0 = r0 < a.seq ? lse[row_base + r0] * TC_LOG2E : 0.0f;
    const float lse1 = r1 < a.seq ? lse[row_base + r1] * TC_LOG2E : 0.0f;
    const float D0 = r0 < a.seq ? Dv[row_base + r0] : 0.0f;
    const float D1 = r1 < a.seq ? Dv[row_base + r1] : 0.0f;
    int rows[MQ][2], segs[MQ][2]; /* the shared layout's */
    float lse2[MQ][2], Drow[MQ][2];
    if constexpr (SHARED) {
#pragma unroll
        for (int m = 0; m < MQ; m++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = qw0 + 16 * m + g + 8 * r;
                rows[m][r] = row;
                segs[m][r] = tc_segment(a, b, row);
                lse2[m][r] = row < a.seq ? lse[row_base + row] * TC_LOG2E : 0.0f;
                Drow[m][r] = row < a.seq ? Dv[row_base + row] : 0.0f;
            }
    }
    float dq_acc[MQ][DT][4];
    float(&dqa)[DT][4] = dq_acc[0]; /* the own layout's one m-tile */
#pragma unroll
    for (int m = 0; m < MQ; m++)
#pragma unroll
        for (int d = 0; d < DT; d++)
            for (int e = 0; e < 4; e++)
                dq_acc[m][d][e] = 0.0f;

    for (int it = 0; kt < nkt; it++) { /* it: visited tiles so far, kt: this one */
        const int k0 = kt * TC_BK, kn = min(TC_BK, a.seq - k0), buf = STAGES == 2 ? it & 1 : 0;
        if constexpr (STAGES == 1) {
            __syncthreads(); /* the previous key tile is no longer read */
            tc_stage_kv<HDMAX, TC_BK, THREADS>(Ks, Vs, kb, vb, a, kt);
            ft_cp_async_commit();
        }
        ft_cp_async_wait<0>();
        __syncthreads(); /* tile kt visible to all; everyone is done with the previous one */
        TC_COUNT_TILE(2);
        const int kt_next = tc_next_key_tile<TC_BK>(a, b, qr, kt, nkt);
        if constexpr (STAGES == 2) { /* prefetch the next tile into the other buffer */
            if (kt_next < nkt)
                tc_stage_kv<HDMAX, TC_BK, THREADS>(Ks + (buf ^ 1) * TC_BK * P,
                                                   Vs + (buf ^ 1) * TC_BK * P, kb, vb, a, kt_next);
            ft_cp_async_commit();
        }
        kt = kt_next;
        const uint16_t *Kt = Ks + buf * TC_BK * P, *Vt = Vs + buf * TC_BK * P;
        /* warp-uniform: this warp's queries against the key tile (tc_pair_class) */
        const int2 kr = tc_segment_range(a, b, k0, kn);
        const int cls = tc_pair_class(a, qw0, wrows, qwr, k0, TC_BK, kr);
        if constexpr (SHARED) {
            /* phase A: queries 32 wq .. against keys 32 wk .. of the tile */
            const int wq = warp % 4, wk = warp / 4, kw0 = k0 + 32 * wk, kwn = min(32, a.seq - kw0);
            const int cls_a = kwn > 0 ? tc_pair_class(a, qw0, 32, qwr, kw0, 32,
                                                      tc_segment_range(a, b, kw0, kwn))
                                      : TC_SKIP;
            if (cls_a != TC_SKIP)
                TC_COUNT_WARP_TILE(7, cls_a == TC_MASKED);
            tc_shared_dq_scores<HDMAX, P>(dSs, Qs, dOs, Kt, Vt, a, b, rows, lse2, Drow, segs, kw0,
                                          wq, wk, cls_a, lane);
            __syncthreads(); /* dS of the whole tile pair in dSs */
            /* phase B: the same queries, feature half warp / 4 */
            if (cls != TC_SKIP)
                tc_shared_dq_grads<HDMAX, P>(dq_acc, dSs, Kt, wq, warp / 4, lane);
            continue; /* the next tile's barrier orders these reads before its stores */
        }
        if (cls == TC_SKIP)
            continue;
        const bool masked = cls == TC_MASKED;
        TC_COUNT_WARP_TILE(7, masked);
        float p[NK][4], ds[NK][4]; /* loop orders: as in the dK/dV kernel */
        uint32_t dsk[NK][2];       /* ds as bf16 pairs (rows g, g + 8), made at once */
        if constexpr (!QO_IN_REGS)
            tc_bwd_st_reloaded<HDMAX>(p, ds, Qs, dOs, qo_off, Kt, Vt, lane);
#pragma unroll
        for (int n = 0; n < NK; n++) {
            if constexpr (QO_IN_REGS)
                if (n % 2 == 0)
                    tc_bwd_st_held<HDMAX>(p, ds, qa, oa, Kt, Vt, n, lane);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float pe = tc_exp2(fmaf(p[n][e], a.scale_log2, -(e < 2 ? lse0 : lse1)));
                if (masked) {
                    int col = k0 + n * 8 + 2 * t + (e & 1);
                    if (!(e < 2 ? tc_visible(a, b, r0, col, seg0) : tc_visible(a, b, r1, col, seg1)))
                        pe = 0.0f;
                }
                p[n][e] = pe;
                ds[n][e] = pe * (ds[n][e] - (e < 2 ? D0 : D1));
            }
            dsk[n][0] = tc_pack_bf16(ds[n][0], ds[n][1]);
            dsk[n][1] = tc_pack_bf16(ds[n][2], ds[n][3]);
        }
        /* dQ += dS K: 16 keys per k-step, two feature groups per ldmatrix.x4.trans */
#pragma unroll
        for (int j = 0; j < NK / 2; j++) {
            uint32_t sa[4] = TC_PACKED_A(dsk, j);
#pragma unroll
            for (int d = 0; d < DT; d += 2) {
                uint32_t kf[4];
                ft_ldmatrix<4, true>(kf, Kt + tc_b_pair_row(j * 16, d * 8, lane, P));
                tc_mma_pair(dqa[d], dqa[d + 1], sa, kf);
            }
        }
    }
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */
    const float scale = a.scale_log2 / TC_LOG2E;
    OT *dqb = dq + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    const int f0 = SHARED ? (warp / 4) * (HDMAX / 2) : 0; /* this warp's first feature */
#pragma unroll
    for (int m = 0; m < MQ; m++)
#pragma unroll
        for (int d = 0; d < DT; d++) {
            int c = f0 + d * 8 + 2 * t;
            if (c >= a.hd)
                continue;
            for (int e = 0; e < 4; e++) {
                int row = SHARED ? rows[m][e >> 1] : e < 2 ? r0 : r1;
                if (row < a.seq)
                    ft_st(dqb, (size_t)row * a.q_stride + c + (e & 1), dq_acc[m][d][e] * scale);
            }
        }
}

/* dq = scale * dq_acc, rounded once to dq's storage (the one-pass backward's last step). */
template <typename OT>
__global__ void tc_dq_convert_kernel(OT *__restrict__ dq, const float *__restrict__ dq_acc,
                                     float scale, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        ft_st(dq, i, dq_acc[i] * scale);
}

/* dq_acc: NULL for the two deterministic passes, else the one-pass backward's zeroed fp32
 * accumulator (head_dim <= 128); WARPS of the dK/dV kernel (4, or 8 at head_dim <= 128),
 * SHARED its layout (8 warps) */
template <int HDMAX, int WARPS, bool SHARED, typename OT>
static cudaError_t tc_bwd_run(OT *dq, OT *dk, OT *dv, float *dq_acc, const uint16_t *dout,
                              const float *lse, const float *Dv, const uint16_t *q,
                              const uint16_t *k, const uint16_t *v, const TcArgs &a,
                              ft_attn_shape s, cudaStream_t st)
{
    typedef TcBwdCfg<HDMAX, WARPS> C;
    typedef void (*dkdv_fn)(OT *, OT *, float *, const uint16_t *, const float *, const float *,
                            const uint16_t *, const uint16_t *, const uint16_t *, TcArgs, int);
    constexpr bool can_fuse = C::DSPLIT == 1;
    const bool fused = can_fuse && dq_acc != NULL;
    dkdv_fn kkv = tc_bwd_dkdv_kernel<HDMAX, false, OT, WARPS, SHARED>;
    size_t smem_kv = SHARED ? C::smem_shared : C::smem_dkdv;
    if constexpr (can_fuse)
        if (fused) {
            kkv = tc_bwd_dkdv_kernel<HDMAX, can_fuse, OT, WARPS, SHARED>;
            smem_kv = SHARED ? C::smem_shared : C::smem_fused;
        }
    cudaError_t e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem_kv);
    if (e != cudaSuccess)
        return e;
    const int bkv = C::BKV;
    dim3 gkv((unsigned)((s.seq_len + bkv - 1) / bkv), (unsigned)s.n_kv_heads,
             (unsigned)s.batch);
    FT_LAUNCH(kkv, gkv, WARPS * 32, smem_kv, st)(dk, dv, dq_acc, dout, lse, Dv, q, k, v, a,
                                                 s.n_heads);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    if (fused) {
        size_t n = (size_t)s.batch * s.seq_len * a.q_stride;
        void (*conv)(OT *, const float *, float, size_t) = tc_dq_convert_kernel<OT>;
        FT_LAUNCH(conv, ft_cuda_grid_for(n, 256), 256, 0, st)(dq, dq_acc, a.scale_log2 / TC_LOG2E,
                                                              n);
        return cudaGetLastError();
    }
    void (*kq)(OT *, const uint16_t *, const float *, const float *, const uint16_t *,
               const uint16_t *, const uint16_t *, TcArgs, int) =
        tc_bwd_dq_kernel<HDMAX, OT, SHARED>;
    const size_t smem_q = SHARED ? C::smem_dq_shared : C::smem_dq;
    e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q);
    if (e != cudaSuccess)
        return e;
    const int bq = SHARED ? 128 : TC_BQ;
    dim3 gq((unsigned)((s.seq_len + bq - 1) / bq), (unsigned)s.n_heads, (unsigned)s.batch);
    FT_LAUNCH(kq, gq, SHARED ? 256 : TC_THREADS, smem_q, st)(dq, dout, lse, Dv, q, k, v, a,
                                                           s.n_heads);
    return cudaGetLastError();
}

/* FTMPI_ATTENTION_NONDETERMINISTIC=1: the one-pass backward where it applies (head_dim
 * <= 128). Read per call (a getenv beside the launches), by the scratch size and the
 * launch alike. */
static bool tc_bwd_one_pass(ft_attn_shape s)
{
    const char *e = getenv("FTMPI_ATTENTION_NONDETERMINISTIC");
    return s.head_dim <= 128 && e && strcmp(e, "1") == 0;
}

/* The dK/dV pass's block at head_dim <= 128 (ft_cuda_attention_tc_bwd_layout):
 *  - FT_TC_BWD_OWN: 64 keys, 4 warps each owning 16 keys throughout (the default; two blocks
 *    an SM);
 *  - FT_TC_BWD_WIDE (FTMPI_TC_BWD_KEYS=128): 128 keys, 8 warps of the same layout: each
 *    staged Q and dO tile serves twice the keys and in the one-pass backward each dQ atomic
 *    sums twice the keys, for a barrier across 8 warps and one block an SM;
 *  - FT_TC_BWD_SHARED (FTMPI_TC_BWD_LAYOUT=shared): 128 keys, 8 warps in FlashAttention-2's
 *    layout, P^T and dS^T through shared memory (cuda_attention_tc_bwd_shared.cuh), where
 *    the device's shared memory takes its block (at head_dim 128, 173 KiB: an H100's 227
 *    but not an A100's 163; the wide block there).
 * Which is faster is a measurement: the switches let bench/gpu_attention.sh time each in
 * one run. Read per call (a getenv beside the launches), so a test can switch them. */
static int tc_bwd_layout(ft_attn_shape s)
{
    if (s.head_dim > 128)
        return FT_TC_BWD_OWN;
    const char *l = getenv("FTMPI_TC_BWD_LAYOUT"), *k = getenv("FTMPI_TC_BWD_KEYS");
    if (l && strcmp(l, "shared") == 0) {
        int dev = 0, optin = 0;
        size_t need = s.head_dim <= 64 ? TcBwdCfg<64, 8>::smem_shared
                                       : TcBwdCfg<128, 8>::smem_shared;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ==
                cudaSuccess &&
            need <= (size_t)optin)
            return FT_TC_BWD_SHARED;
        return FT_TC_BWD_WIDE;
    }
    return k && strcmp(k, "128") == 0 ? FT_TC_BWD_WIDE : FT_TC_BWD_OWN;
}

extern "C" int ft_cuda_attention_tc_bwd_layout(ft_attn_shape s) { return tc_bwd_layout(s); }

/* Scratch: the segment-range table, then D, then (one-pass) the fp32 dQ accumulator, each
 * 256-byte aligned. */
static size_t tc_bwd_d_offset(ft_attn_shape s) { return (tc_seg_range_bytes(s) + 255) / 256 * 256; }

static size_t tc_bwd_acc_offset(ft_attn_shape s)
{
    size_t d_bytes = (size_t)s.batch * s.n_heads * s.seq_len * sizeof(float);
    return tc_bwd_d_offset(s) + (d_bytes + 255) / 256 * 256;
}

extern "C" size_t ft_cuda_attention_bwd_bf16_scratch_bytes(ft_attn_shape s)
{
    if (tc_bwd_one_pass(s))
        return tc_bwd_acc_offset(s) +
               (size_t)s.batch * s.seq_len * s.n_heads * s.head_dim * sizeof(float);
    return tc_bwd_d_offset(s) + (size_t)s.batch * s.n_heads * s.seq_len * sizeof(float);
}

template <typename OT>
static cudaError_t tc_bwd_dispatch(OT *dq, OT *dk, OT *dv, const uint16_t *dout, const OT *out,
                                   const float *lse, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const TcArgs &a, ft_attn_shape s,
                                   float *Dv, float *dq_acc, cudaStream_t st)
{
    size_t rows = (size_t)s.batch * s.n_heads * s.seq_len;
    void (*dot)(float *, const uint16_t *, const OT *, TcArgs, int, size_t) =
        tc_bwd_dot_kernel<OT>;
    FT_LAUNCH(dot, ft_cuda_grid_for(rows * 32, 256), 256, 0, st)
    (Dv, dout, out, a, s.n_heads, rows);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && dq_acc)
        e = cudaMemsetAsync(dq_acc, 0, (size_t)s.batch * s.seq_len * a.q_stride * sizeof(float),
                            st);
    if (e != cudaSuccess)
        return e;
    const int layout = tc_bwd_layout(s);
    if (s.head_dim <= 64 && layout == FT_TC_BWD_SHARED)
        return tc_bwd_run<64, 8, true>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    if (s.head_dim <= 64 && layout == FT_TC_BWD_WIDE)
        return tc_bwd_run<64, 8, false>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    if (s.head_dim <= 64)
        return tc_bwd_run<64, 4, false>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    if (s.head_dim <= 128 && layout == FT_TC_BWD_SHARED)
        return tc_bwd_run<128, 8, true>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    if (s.head_dim <= 128 && layout == FT_TC_BWD_WIDE)
        return tc_bwd_run<128, 8, false>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    if (s.head_dim <= 128)
        return tc_bwd_run<128, 4, false>(dq, dk, dv, dq_acc, dout, lse, Dv, q, k, v, a, s, st);
    return tc_bwd_run<256, 4, false>(dq, dk, dv, NULL, dout, lse, Dv, q, k, v, a, s, st);
}

extern "C" cudaError_t ft_cuda_launch_attention_bwd_bf16(ft_dtype dt, void *dq, void *dk, void *dv,
                                                         const uint16_t *dout, const void *out,
                                                         const float *lse, const uint16_t *q,
                                                         const uint16_t *k, const uint16_t *v,
                                                         const int32_t *segment, ft_attn_shape s,
                                                         void *scratch, cudaStream_t st)
{
    if (s.batch <= 0 || s.seq_len <= 0)
        return cudaSuccess;
    if (!ft_cuda_attention_tc_supported(s))
        return cudaErrorInvalidValue;
    TcArgs a = tc_args(s, segment, scratch);
    float *Dv = (float *)((char *)scratch + tc_bwd_d_offset(s));
    float *dq_acc = tc_bwd_one_pass(s) ? (float *)((char *)scratch + tc_bwd_acc_offset(s)) : NULL;
    cudaError_t e = tc_seg_ranges(a, s.batch, st);
    if (e != cudaSuccess)
        return e;
    if (dt == FT_DTYPE_BF16)
        return tc_bwd_dispatch((ft_bf16 *)dq, (ft_bf16 *)dk, (ft_bf16 *)dv, dout,
                               (const ft_bf16 *)out, lse, q, k, v, a, s, Dv, dq_acc, st);
    return tc_bwd_dispatch((float *)dq, (float *)dk, (float *)dv, dout, (const float *)out, lse, q,
                           k, v, a, s, Dv, dq_acc, st);
}
