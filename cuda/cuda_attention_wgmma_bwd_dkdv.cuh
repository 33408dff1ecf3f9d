/* The dK/dV pass of the attention backward on Hopper's warpgroup MMA
 * (cuda_attention_wgmma_bwd.cu says what it computes and how the work is split):
 * wg_bwd_dkdv_kernel, and the backward's tile geometry (WgBwdCfg). */
#ifndef FT_CUDA_ATTENTION_WGMMA_BWD_DKDV_CUH
#define FT_CUDA_ATTENTION_WGMMA_BWD_DKDV_CUH

#include "cuda_attention_tc_bwd.cuh"
#include "cuda_attention_wgmma.cuh"

template <int HDMAX>
struct WgBwdCfg {
    static constexpr int BKV = 128, BQ = 64;    /* dK/dV: keys a block, queries a tile */
    static constexpr int BQ_DQ = 128, BK = 64;  /* dQ: queries a block, keys a tile */
    static constexpr int ROW_BYTES = HDMAX * 2; /* a token's features */
    /* dK/dV: a tile's gradient products beside the next tile's scores where the registers
     * allow (dK and dV take HDMAX of them: at 128 there is no room), which keeps a query
     * tile in use one tile longer: three Q/dO buffers instead of two */
    static constexpr bool OVERLAP = HDMAX <= 64;
    static constexpr int QBUFS = OVERLAP ? 3 : 2;
    static constexpr size_t smem_dkdv = 1024 + (size_t)(2 * BKV + 2 * QBUFS * BQ) * ROW_BYTES +
                                        2 * QBUFS * BQ * sizeof(float);
    /* dQ: Q and dO of 128 queries, three K and two V tiles of 64 keys */
    static constexpr size_t smem_dq = 1024 + (size_t)(2 * BQ_DQ + 5 * BK) * ROW_BYTES;
};

template <int HDMAX, typename OT>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wg_bwd_dkdv_kernel(OT *__restrict__ dk, OT *__restrict__ dv, const uint16_t *__restrict__ dout,
                       const float *__restrict__ lse, const float *__restrict__ Dv,
                       const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                       const uint16_t *__restrict__ v, TcArgs a, int heads)
{
#if FT_WGMMA_CODE
    typedef WgBwdCfg<HDMAX> C;
    constexpr int BKV = C::BKV, BQ = C::BQ, KS = HDMAX / 16, NQ = BQ / 8, DT = HDMAX / 8;
    constexpr int KV_BYTES = BKV * C::ROW_BYTES, Q_BYTES = BQ * C::ROW_BYTES;
    constexpr bool OVERLAP = C::OVERLAP;
    constexpr int QBUFS = C::QBUFS;
    FT_DYNAMIC_SMEM(uint8_t, raw);
    uint32_t k_addr;
    uint8_t *Ks = wg_smem_aligned(raw, &k_addr), *Vs = Ks + KV_BYTES;
    uint8_t *Qs = Vs + KV_BYTES, *dOs = Qs + QBUFS * Q_BYTES; /* [QBUFS] tiles each */
    float *lse_s = (float *)(dOs + QBUFS * Q_BYTES), *D_s = lse_s + QBUFS * BQ;
    const uint32_t v_addr = k_addr + KV_BYTES, q_addr = v_addr + KV_BYTES,
                   do_addr = q_addr + QBUFS * Q_BYTES;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wg = warp / 4;
    const int g = lane / 4, t = lane % 4;
    const int k0 = (int)blockIdx.x * BKV, kn = min(BKV, a.seq - k0);
    const int hk = blockIdx.y, b = blockIdx.z;
    const uint16_t *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const uint16_t *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    wg_stage<HDMAX, BKV>(Ks, kb, a.kv_stride, k0, kn, a.hd);
    wg_stage<HDMAX, BKV>(Vs, vb, a.kv_stride, k0, kn, a.hd);
    ft_cp_async_commit();

    /* this warpgroup's keys [kw0, kw0 + 64) and their documents (exact from the granule
     * table: 64-key spans start on granules); this lane's two keys */
    const int kw0 = k0 + 64 * wg, kwn = min(64, a.seq - kw0);
    const int2 kr = tc_segment_range(a, b, k0, kn);
    const int2 kwr = kwn > 0 ? tc_segment_range(a, b, kw0, kwn) : make_int2(0, 0);
    const int key0 = kw0 + 16 * (warp % 4) + g, key1 = key0 + 8;
    float dka[DT][4], dva[DT][4];
#pragma unroll
    for (int d = 0; d < DT; d++)
        for (int e = 0; e < 4; e++)
            dka[d][e] = dva[d][e] = 0.0f;

    /* the (query head of the group, query tile) pairs, as the mma.sync dK/dV pass visits
     * them */
    auto next_pair = [&](int &gi, int &qt) -> bool {
        return tc_next_query_pair<BQ>(a, b, kr, k0, kn, gi, qt);
    };
    auto stage_queries = [&](int buf, int gi, int qt) {
        const int h = hk * a.group + gi, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
        const size_t tok = (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
        const size_t row = ((size_t)b * heads + h) * a.seq;
        wg_stage<HDMAX, BQ>(Qs + buf * Q_BYTES, q + tok, a.q_stride, q0, qn, a.hd);
        wg_stage<HDMAX, BQ>(dOs + buf * Q_BYTES, dout + tok, a.q_stride, q0, qn, a.hd);
        tc_stage_query_stats<BQ, WG_THREADS>(lse_s + buf * BQ, D_s + buf * BQ, lse, Dv, row, q0,
                                             qn);
    };
    int gi = 0, qt = k0 / BQ - 1;
    bool have = next_pair(gi, qt);
    if (have) {
        stage_queries(0, gi, qt);
    } else { /* zeros, for the last gradient products below */
        wg_stage<HDMAX, BQ>(Qs, q, a.q_stride, 0, 0, a.hd);
        wg_stage<HDMAX, BQ>(dOs, dout, a.q_stride, 0, 0, a.hd);
    }
    ft_cp_async_commit();

    /* P^T and dS^T as bf16 pairs (keys g, g + 8): the A operands of dV += P^T dO and
     * dK += dS^T Q, whose B are dO and Q of buffer grad_buf. With OVERLAP they are the tile
     * before's, issued beside this tile's scores (zero before the first tile and for a
     * skipped one: every visited tile then issues all four products, so that no wgmma sits
     * on a divergent path); else this tile's, issued once they are made. */
    uint32_t pk[NQ][2], dsk[NQ][2];
#pragma unroll
    for (int n = 0; n < NQ; n++)
        pk[n][0] = pk[n][1] = dsk[n][0] = dsk[n][1] = 0u;
    int grad_buf = 0;
    auto issue_grads = [&]() {
        const uint32_t qa = q_addr + grad_buf * Q_BYTES, oa = do_addr + grad_buf * Q_BYTES;
#pragma unroll
        for (int j = 0; j < NQ / 2; j++) {
            ft_wgmma_rs<HDMAX, 1>(&dva[0][0], &pk[2 * j][0], wg_desc_mn<BQ>(oa, 16 * j), 1);
            ft_wgmma_rs<HDMAX, 1>(&dka[0][0], &dsk[2 * j][0], wg_desc_mn<BQ>(qa, 16 * j), 1);
        }
        ft_wgmma_commit();
    };
    for (int it = 0; have; it++) { /* it: visited pairs so far, (gi, qt): this one */
        const int q0 = qt * BQ, qn = min(BQ, a.seq - q0), buf = it % QBUFS;
        ft_cp_async_wait<0>();
        ft_fence_proxy_async(); /* the landed copies visible to wgmma's reads */
        __syncthreads();        /* tile visible to all; everyone done with the buffer the
                                   prefetch below overwrites (with OVERLAP, the gradient
                                   products of tile it - 2 read it last) */
        TC_COUNT_TILE(1);
        have = next_pair(gi, qt);
        if (have)
            stage_queries((it + 1) % QBUFS, gi, qt);
        ft_cp_async_commit();
        const int cls = tc_pair_class(a, q0, BQ, tc_segment_range(a, b, q0, qn), kw0, 64, kwr);
        if constexpr (!OVERLAP)
            if (cls == TC_SKIP)
                continue;
        const bool masked = cls == TC_MASKED;
        if (cls != TC_SKIP)
            TC_COUNT_WARP_TILE(5, masked);
        const uint32_t qt_addr = q_addr + buf * Q_BYTES, dot_addr = do_addr + buf * Q_BYTES;
        const float *lse_t = lse_s + buf * BQ, *D_t = D_s + buf * BQ;

        /* S^T = K Q^T and dP^T = V dO^T: this warpgroup's 64 keys x 64 queries (fresh
         * accumulators each tile, their first product ignoring what they hold: nothing
         * of them lives on through the next products) */
        float st[NQ][4], dpt[NQ][4];
        ft_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            ft_wgmma_ss<BQ>(&st[0][0], wg_desc_k<BKV>(k_addr, 64 * wg, ks),
                            wg_desc_k<BQ>(qt_addr, 0, ks), ks > 0);
            ft_wgmma_ss<BQ>(&dpt[0][0], wg_desc_k<BKV>(v_addr, 64 * wg, ks),
                            wg_desc_k<BQ>(dot_addr, 0, ks), ks > 0);
        }
        ft_wgmma_commit();
        if constexpr (OVERLAP) {
            issue_grads();
            ft_wgmma_wait<1>(); /* the scores have landed; the gradient products may run */
        } else {
            ft_wgmma_wait<0>();
        }
        ft_wgmma_pin(st);
        ft_wgmma_pin(dpt);

        /* p and dS of element e of 8-query group n: this lane's key g (e < 2) or g + 8,
         * query 8n + 2t + (e & 1) */
        auto grads_of = [&](int n, int e, float &p, float &ds) {
            const int qi = n * 8 + 2 * t + (e & 1), qc = q0 + qi;
            auto hidden = [&] {
                return !tc_visible(a, b, qc, e < 2 ? key0 : key1, tc_segment(a, b, qc));
            };
            p = tc_softmax_grad(st[n][e], dpt[n][e], lse_t[qi], D_t[qi], a.scale_log2, masked,
                                hidden, ds);
        };
        if constexpr (OVERLAP) { /* in fp32 while the products run, packed once they end */
            if (cls != TC_SKIP)
#pragma unroll
                for (int n = 0; n < NQ; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        grads_of(n, e, st[n][e], dpt[n][e]);
            ft_wgmma_wait<0>();
            ft_wgmma_pin(dva);
            ft_wgmma_pin(dka);
            ft_wgmma_pin(pk);
            ft_wgmma_pin(dsk);
#pragma unroll
            for (int n = 0; n < NQ; n++) {
                const bool keep = cls != TC_SKIP;
                pk[n][0] = keep ? tc_pack_bf16(st[n][0], st[n][1]) : 0u;
                pk[n][1] = keep ? tc_pack_bf16(st[n][2], st[n][3]) : 0u;
                dsk[n][0] = keep ? tc_pack_bf16(dpt[n][0], dpt[n][1]) : 0u;
                dsk[n][1] = keep ? tc_pack_bf16(dpt[n][2], dpt[n][3]) : 0u;
            }
            grad_buf = buf;
        } else { /* packed at once, so that the fp32 values die here (registers) */
#pragma unroll
            for (int n = 0; n < NQ; n++) {
                float p[4], ds[4];
#pragma unroll
                for (int e = 0; e < 4; e++)
                    grads_of(n, e, p[e], ds[e]);
                pk[n][0] = tc_pack_bf16(p[0], p[1]);
                pk[n][1] = tc_pack_bf16(p[2], p[3]);
                dsk[n][0] = tc_pack_bf16(ds[0], ds[1]);
                dsk[n][1] = tc_pack_bf16(ds[2], ds[3]);
            }
            grad_buf = buf;
            ft_wgmma_pin(dva);
            ft_wgmma_pin(dka);
            ft_wgmma_fence();
            issue_grads();
            ft_wgmma_wait<0>();
            ft_wgmma_pin(dva);
            ft_wgmma_pin(dka);
            ft_wgmma_pin(pk);
            ft_wgmma_pin(dsk);
        }
    }
    if constexpr (OVERLAP) { /* the last tile's gradient products (none visited: zeros) */
        ft_wgmma_fence();
        issue_grads();
        ft_wgmma_wait<0>();
        ft_wgmma_pin(dva);
        ft_wgmma_pin(dka);
    }
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */
    const float scale = a.scale_log2 / TC_LOG2E;
    OT *dkb = dk + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    OT *dvb = dv + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const int wkey0 = kw0 + 16 * (warp % 4); /* this warp's 16 keys */
    tc_store_tiles<1, DT>(dkb, a.kv_stride, &dka, scale, wkey0, 0, a, lane);
    tc_store_tiles<1, DT>(dvb, a.kv_stride, &dva, 1.0f, wkey0, 0, a, lane);
#else
    (void)dk, (void)dv, (void)dout, (void)lse, (void)Dv, (void)q, (void)k, (void)v, (void)a,
        (void)heads;
    __trap(); /* not built for this device: the host does not launch it */
#endif
}

#endif
