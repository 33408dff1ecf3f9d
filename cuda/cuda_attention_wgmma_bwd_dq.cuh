/* The dQ pass of the attention backward on Hopper's warpgroup MMA
 * (cuda_attention_wgmma_bwd.cu says what it computes and how the work is split):
 * wg_bwd_dq_kernel. */
#ifndef FT_CUDA_ATTENTION_WGMMA_BWD_DQ_CUH
#define FT_CUDA_ATTENTION_WGMMA_BWD_DQ_CUH

#include "cuda_attention_wgmma_bwd_dkdv.cuh"

template <int HDMAX, typename OT>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wg_bwd_dq_kernel(OT *__restrict__ dq, const uint16_t *__restrict__ dout,
                     const float *__restrict__ lse, const float *__restrict__ Dv,
                     const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                     const uint16_t *__restrict__ v, TcArgs a, int heads)
{
#if FT_WGMMA_CODE
    typedef WgBwdCfg<HDMAX> C;
    constexpr int BQ = C::BQ_DQ, BK = C::BK, KS = HDMAX / 16, NK = BK / 8, DT = HDMAX / 8;
    constexpr int Q_BYTES = BQ * C::ROW_BYTES, KV_BYTES = BK * C::ROW_BYTES;
    FT_DYNAMIC_SMEM(uint8_t, raw);
    uint32_t q_addr;
    uint8_t *Qs = wg_smem_aligned(raw, &q_addr), *dOs = Qs + Q_BYTES;
    uint8_t *Ks = dOs + Q_BYTES, *Vs = Ks + 3 * KV_BYTES; /* [3] and [2] tiles */
    const uint32_t do_addr = q_addr + Q_BYTES, k_addr = do_addr + Q_BYTES,
                   v_addr = k_addr + 3 * KV_BYTES;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wg = warp / 4;
    const int g = lane / 4, t = lane % 4;
    const TcQueryBlock blk = tc_query_block<BQ, BK>(a);
    const int h = blk.h, b = blk.b, q0 = blk.q0, qn = blk.qn, nkt = blk.nkt;
    const int2 qr = blk.qr;
    int kt = blk.kt;
    const size_t tok = blk.q_off;
    const uint16_t *kb = k + blk.kv_off, *vb = v + blk.kv_off;
    wg_stage<HDMAX, BQ>(Qs, q + tok, a.q_stride, q0, qn, a.hd);
    wg_stage<HDMAX, BQ>(dOs, dout + tok, a.q_stride, q0, qn, a.hd);
    { /* the first tile; none (all zeros: see the last dQ product below) if none is visited */
        const int k0 = kt < nkt ? kt * BK : 0, kn = kt < nkt ? min(BK, a.seq - k0) : 0;
        wg_stage<HDMAX, BK>(Ks, kb, a.kv_stride, k0, kn, a.hd);
        wg_stage<HDMAX, BK>(Vs, vb, a.kv_stride, k0, kn, a.hd);
    }
    ft_cp_async_commit();

    /* this warpgroup's queries [w0, w0 + 64) and their documents; this lane's two rows,
     * their ids, lse (base 2) and D */
    const int w0 = q0 + 64 * wg, wn = min(64, a.seq - w0);
    const int2 wr = wn > 0 ? tc_segment_range(a, b, w0, wn) : make_int2(0, 0);
    const size_t row_base = ((size_t)b * heads + h) * a.seq;
    const int r0 = w0 + 16 * (warp % 4) + g, r1 = r0 + 8;
    const int seg0 = tc_segment(a, b, r0), seg1 = tc_segment(a, b, r1);
    const float lse0 = r0 < a.seq ? lse[row_base + r0] * TC_LOG2E : 0.0f;
    const float lse1 = r1 < a.seq ? lse[row_base + r1] * TC_LOG2E : 0.0f;
    const float D0 = r0 < a.seq ? Dv[row_base + r0] : 0.0f;
    const float D1 = r1 < a.seq ? Dv[row_base + r1] : 0.0f;
    float dqa[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++)
        for (int e = 0; e < 4; e++)
            dqa[d][e] = 0.0f;

    /* dQ += dS K of the tile before is issued beside each tile's S and dP, as the forward
     * overlaps its P V (cuda_attention_wgmma.cu): dsk holds that dS (zero before the first
     * tile and for a tile the warpgroup skips), K its key tile in K buffer dq_buf; a
     * tile's K is read during the next tile's dS while the one after loads: three K
     * buffers, two V. Every visited tile issues the three products (a skipped one's S and
     * dP ignored), so that no wgmma sits on a divergent path. */
    uint32_t dsk[NK][2];
#pragma unroll
    for (int n = 0; n < NK; n++)
        dsk[n][0] = dsk[n][1] = 0u;
    int dq_buf = 0;
    auto issue_dq = [&]() {
#pragma unroll
        for (int j = 0; j < NK / 2; j++)
            ft_wgmma_rs<HDMAX, 1>(&dqa[0][0], &dsk[2 * j][0],
                                  wg_desc_mn<BK>(k_addr + dq_buf * KV_BYTES, 16 * j), 1);
        ft_wgmma_commit();
    };
    for (int it = 0; kt < nkt; it++) { /* it: visited tiles so far, kt: this one */
        const int k0 = kt * BK, kn = min(BK, a.seq - k0), kbuf = it % 3, vbuf = it & 1;
        ft_cp_async_wait<0>();
        ft_fence_proxy_async();
        __syncthreads(); /* tile kt visible to all; everyone done with the buffers the
                            prefetch below overwrites */
        TC_COUNT_TILE(2);
        const int kt_next = tc_next_key_tile<BK>(a, b, qr, kt, nkt);
        if (kt_next < nkt) { /* K into the buffer dQ of tile it - 2 read, V into the one
                                dP of tile it - 1 read: both finished before the barrier */
            const int n0 = kt_next * BK, nn = min(BK, a.seq - n0);
            wg_stage<HDMAX, BK>(Ks + (it + 1) % 3 * KV_BYTES, kb, a.kv_stride, n0, nn, a.hd);
            wg_stage<HDMAX, BK>(Vs + (vbuf ^ 1) * KV_BYTES, vb, a.kv_stride, n0, nn, a.hd);
        }
        ft_cp_async_commit();
        kt = kt_next;
        const int cls = tc_pair_class(a, w0, 64, wr, k0, BK, tc_segment_range(a, b, k0, kn));
        const bool masked = cls == TC_MASKED;
        if (cls != TC_SKIP)
            TC_COUNT_WARP_TILE(7, masked);
        const uint32_t kt_addr = k_addr + kbuf * KV_BYTES, vt_addr = v_addr + vbuf * KV_BYTES;

        /* S = Q K^T and dP = dO V^T: this warpgroup's 64 queries x 64 keys (fresh
         * accumulators, as in the dK/dV pass); then dQ += dS K of the tile before */
        float s[NK][4], dp[NK][4];
        ft_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            ft_wgmma_ss<BK>(&s[0][0], wg_desc_k<BQ>(q_addr, 64 * wg, ks),
                            wg_desc_k<BK>(kt_addr, 0, ks), ks > 0);
            ft_wgmma_ss<BK>(&dp[0][0], wg_desc_k<BQ>(do_addr, 64 * wg, ks),
                            wg_desc_k<BK>(vt_addr, 0, ks), ks > 0);
        }
        ft_wgmma_commit();
        issue_dq();
        ft_wgmma_wait<1>(); /* S and dP have landed; dQ's product may still run */
        ft_wgmma_pin(s);
        ft_wgmma_pin(dp);

        /* dS = P (dP - D) in fp32, into s, while the tensor cores finish dQ */
        if (cls != TC_SKIP) {
#pragma unroll
            for (int n = 0; n < NK; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    auto hidden = [&] {
                        const int col = k0 + n * 8 + 2 * t + (e & 1);
                        return !(e < 2 ? tc_visible(a, b, r0, col, seg0)
                                       : tc_visible(a, b, r1, col, seg1));
                    };
                    tc_softmax_grad(s[n][e], dp[n][e], e < 2 ? lse0 : lse1, e < 2 ? D0 : D1,
                                    a.scale_log2, masked, hidden, s[n][e]);
                }
        }
        ft_wgmma_wait<0>(); /* dQ and dsk were the pending product's until now */
        ft_wgmma_pin(dqa);
        ft_wgmma_pin(dsk);
#pragma unroll
        for (int n = 0; n < NK; n++) { /* dS as bf16 pairs (rows g, g + 8); zero if skipped */
            dsk[n][0] = cls != TC_SKIP ? tc_pack_bf16(s[n][0], s[n][1]) : 0u;
            dsk[n][1] = cls != TC_SKIP ? tc_pack_bf16(s[n][2], s[n][3]) : 0u;
        }
        dq_buf = kbuf;
    }
    /* the last tile's dQ += dS K (with no tile visited: zeros times K buffer 0, which the
     * prologue zero-filled) */
    ft_wgmma_fence();
    issue_dq();
    ft_wgmma_wait<0>();
    ft_wgmma_pin(dqa);
    ft_cp_async_wait<0>();
    OT *dqb = dq + tok;
    tc_store_tiles<1, DT>(dqb, a.q_stride, &dqa, a.scale_log2 / TC_LOG2E,
                          w0 + 16 * (warp % 4), 0, a, lane);
#else
    (void)dq, (void)dout, (void)lse, (void)Dv, (void)q, (void)k, (void)v, (void)a, (void)heads;
    __trap();
#endif
}

#endif
