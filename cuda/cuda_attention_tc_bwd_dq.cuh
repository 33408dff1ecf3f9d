/* The dQ pass of the tensor-core attention backward (cuda_attention_tc_bwd.cu says what it
 * computes and how the work is split): tc_bwd_dq_kernel, in the own layout (warps of 16
 * queries, 64 a block) or the shared one (cuda_attention_tc_bwd_shared.cuh). */
#ifndef FT_CUDA_ATTENTION_TC_BWD_DQ_CUH
#define FT_CUDA_ATTENTION_TC_BWD_DQ_CUH

#include "cuda_attention_tc_bwd.cuh"

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
    /* key tiles [first in the window, diagonal], those meeting the query tile's documents */
    const TcQueryBlock blk = tc_query_block<BQ, TC_BK>(a);
    const int h = blk.h, b = blk.b, q0 = blk.q0, qn = blk.qn, nkt = blk.nkt;
    const int2 qr = blk.qr;
    int kt = blk.kt;
    const uint16_t *qb = q + blk.q_off, *ob = dout + blk.q_off;
    const uint16_t *kb = k + blk.kv_off, *vb = v + blk.kv_off;
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
    int segs[MQ][2]; /* the shared layout's rows' ids, lse (base 2) and D */
    float lse2[MQ][2], Drow[MQ][2];
    if constexpr (SHARED) {
#pragma unroll
        for (int m = 0; m < MQ; m++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = qw0 + 16 * m + g + 8 * r;
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
            tc_shared_dq_scores<HDMAX, P>(dSs, Qs, dOs, Kt, Vt, a, b, qw0, lse2, Drow, segs, kw0,
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
                auto hidden = [&] {
                    const int col = k0 + n * 8 + 2 * t + (e & 1);
                    return !(e < 2 ? tc_visible(a, b, r0, col, seg0)
                                   : tc_visible(a, b, r1, col, seg1));
                };
                p[n][e] = tc_softmax_grad(p[n][e], ds[n][e], e < 2 ? lse0 : lse1,
                                          e < 2 ? D0 : D1, a.scale_log2, masked, hidden, ds[n][e]);
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
    tc_store_tiles<MQ, DT>(dqb, a.q_stride, dq_acc, scale, qw0, f0, a, lane);
}

#endif
