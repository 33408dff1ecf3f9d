/* The dK/dV pass of the tensor-core attention backward (cuda_attention_tc_bwd.cu says what
 * it computes and how the work is split): tc_bwd_dkdv_kernel, in the own layout (warps of
 * 16 keys; 64 or 128 keys a block) or the shared one (cuda_attention_tc_bwd_shared.cuh),
 * and in the one-pass backward with dQ's atomics. */
#ifndef FT_CUDA_ATTENTION_TC_BWD_DKDV_CUH
#define FT_CUDA_ATTENTION_TC_BWD_DKDV_CUH

#include "cuda_attention_tc_bwd.cuh"

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

    /* the (query head of the group, query tile) pairs the block visits, in order */
    auto next_pair = [&](int &gi, int &qt) -> bool {
        return tc_next_query_pair<TC_BQ>(a, b, kr, k0, kn, gi, qt);
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
        tc_stage_query_stats<TC_BQ, THREADS>(lse_s + buf * TC_BQ, D_s + buf * TC_BQ, lse, Dv, row,
                                             q0, qn);
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
                    const int qi = n * 8 + 2 * t + (e & 1), qc = q0 + qi;
                    auto hidden = [&] {
                        return !tc_visible(a, b, qc, e < 2 ? kr0 : kr1, tc_segment(a, b, qc));
                    };
                    p[n][e] = tc_softmax_grad(p[n][e], ds[n][e], lse_t[qi], D_t[qi], a.scale_log2,
                                              masked, hidden, ds[n][e]);
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
    /* this warp's rows: its keys from kw0, its features from f0 */
    const int f0 = SHARED ? (warp / 4) * (HDMAX / 2) : dbase * 8;
    tc_store_tiles<MK, DT>(dkb, a.kv_stride, dk_acc, scale, kw0, f0, a, lane);
    tc_store_tiles<MK, DT>(dvb, a.kv_stride, dv_acc, 1.0f, kw0, f0, a, lane);
}

#endif
