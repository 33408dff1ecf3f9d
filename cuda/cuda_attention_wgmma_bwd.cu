/* The deterministic two-pass attention backward of cuda_attention_tc_bwd.cu (same
 * arguments, masks, tile skipping and summation order per element: over query tiles for
 * dK and dV, over key tiles for dQ, each in order) with its products issued per
 * warpgroup by Hopper's wgmma from shared memory (cuda_attention_wgmma.cuh), for
 * FTMPI_TC_BWD_WGMMA=1 on compute capability 9.0 (ft_cuda_attention_tc_bwd_wgmma).
 *
 * dK/dV pass (wg_bwd_dkdv_kernel): a block of two warpgroups per 128 keys (kv head, batch
 * row); warpgroup w owns keys 64w .. 64w+63 and their dK and dV accumulators (64 x
 * head_dim fp32 each: 2 x head_dim / 2 registers a thread); it walks 64-query tiles of
 * every query head of its GQA group, double buffered:
 *   S^T = K Q^T, dP^T = V dO^T   wgmma m64n64k16, K or V as A and Q or dO as B, all
 *                                K-major from shared memory (head_dim / 16 each);
 *   P^T = 2^(S^T c - lse), masked where needed; dS^T = P^T (dP^T - D); both to bf16 pairs;
 *   dV += P^T dO, dK += dS^T Q   wgmma m64n{hd}k16, A from those registers (keys as
 *                                rows), dO and Q as B, MN-major, 4 steps of 16 queries.
 * dQ pass (wg_bwd_dq_kernel): a block of two warpgroups per 128 queries (head, batch
 * row); warpgroup w owns queries 64w .. and their dQ; it walks 64-key tiles:
 *   S = Q K^T, dP = dO V^T       m64n64k16, Q or dO as A, K or V as B, K-major;
 *   dS = P (dP - D), bf16;
 *   dQ += dS K                   m64n{hd}k16, A = dS from registers, K as B, MN-major;
 * a tile's dQ product issued beside the next tile's S and dP, so that the tensor cores
 * work on it while the warpgroup computes that tile's dS (the forward's overlap).
 * Each warpgroup classifies its 64 rows against the tile (tc_pair_class): skipped,
 * masked element by element, or bare.
 *
 * Shared memory, head_dim 128: dK/dV 130 KiB (K, V of 128 keys; two Q and dO tiles of 64
 * queries; their lse and D), dQ 145 KiB (Q, dO of 128 queries; three K and two V tiles of
 * 64 keys). ptxas (CUDA 13): dQ 210 registers at head_dim 128, 175 at 64; dK/dV 254-255
 * at 128 (with bf16 outputs 100 bytes of spill: a few accumulators stored and reloaded
 * around each tile's gradient products), 182-184 at 64. */
#include "cuda_attention_tc_bwd.cuh"
#include "cuda_attention_wgmma.cuh"

#include <stdlib.h>
#include <string.h>

template <int HDMAX>
struct WgBwdCfg {
    static constexpr int BKV = 128, BQ = 64;    /* dK/dV: keys a block, queries a tile */
    static constexpr int BQ_DQ = 128, BK = 64;  /* dQ: queries a block, keys a tile */
    static constexpr int ROW_BYTES = HDMAX * 2; /* a token's features */
    static constexpr size_t smem_dkdv = 1024 + (size_t)(2 * BKV + 4 * BQ) * ROW_BYTES +
                                        4 * BQ * sizeof(float);
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
    FT_DYNAMIC_SMEM(uint8_t, raw);
    uint32_t k_addr;
    uint8_t *Ks = wg_smem_aligned(raw, &k_addr), *Vs = Ks + KV_BYTES;
    uint8_t *Qs = Vs + KV_BYTES, *dOs = Qs + 2 * Q_BYTES; /* [2] tiles each */
    float *lse_s = (float *)(dOs + 2 * Q_BYTES), *D_s = lse_s + 2 * BQ;
    const uint32_t v_addr = k_addr + KV_BYTES, q_addr = v_addr + KV_BYTES,
                   do_addr = q_addr + 2 * Q_BYTES;

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
     * them: per head, from the tile holding k0 up to the first past the window, those
     * meeting the keys' documents */
    const int nqt = (a.seq + BQ - 1) / BQ;
    auto next_pair = [&](int &gi, int &qt) -> bool {
        for (qt++; gi < a.group;) {
            const int q0 = qt * BQ;
            if (qt >= nqt || tc_before_window(a, q0, k0, kn)) {
                gi++;
                qt = k0 / BQ;
            } else if (tc_segments_meet(a, b, kr, q0, min(BQ, a.seq - q0))) {
                return true;
            } else {
                qt++;
            }
        }
        return false;
    };
    auto stage_queries = [&](int buf, int gi, int qt) {
        const int h = hk * a.group + gi, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
        const size_t tok = (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
        const size_t row = ((size_t)b * heads + h) * a.seq;
        wg_stage<HDMAX, BQ>(Qs + buf * Q_BYTES, q + tok, a.q_stride, q0, qn, a.hd);
        wg_stage<HDMAX, BQ>(dOs + buf * Q_BYTES, dout + tok, a.q_stride, q0, qn, a.hd);
        for (int i = threadIdx.x; i < BQ; i += WG_THREADS) {
            lse_s[buf * BQ + i] = i < qn ? lse[row + q0 + i] * TC_LOG2E : 0.0f;
            D_s[buf * BQ + i] = i < qn ? Dv[row + q0 + i] : 0.0f;
        }
    };
    int gi = 0, qt = k0 / BQ - 1;
    bool have = next_pair(gi, qt);
    if (have)
        stage_queries(0, gi, qt);
    ft_cp_async_commit();
    for (int it = 0; have; it++) { /* it: visited pairs so far, (gi, qt): this one */
        const int q0 = qt * BQ, qn = min(BQ, a.seq - q0), buf = it & 1;
        ft_cp_async_wait<0>();
        ft_fence_proxy_async(); /* the landed copies visible to wgmma's reads */
        __syncthreads();        /* tile visible to all; everyone done with the previous */
        TC_COUNT_TILE(1);
        have = next_pair(gi, qt);
        if (have) /* prefetch the next pair's tile into the other buffer */
            stage_queries(buf ^ 1, gi, qt);
        ft_cp_async_commit();
        const int cls = tc_pair_class(a, q0, BQ, tc_segment_range(a, b, q0, qn), kw0, 64, kwr);
        if (cls == TC_SKIP)
            continue;
        const bool masked = cls == TC_MASKED;
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
        ft_wgmma_wait<0>();
        ft_wgmma_pin(st);
        ft_wgmma_pin(dpt);

        uint32_t pk[NQ][2], dsk[NQ][2]; /* P^T and dS^T as bf16 pairs (keys g, g + 8) */
#pragma unroll
        for (int n = 0; n < NQ; n++) {
            float p[4], ds[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int qi = n * 8 + 2 * t + (e & 1);
                float pe = tc_exp2(fmaf(st[n][e], a.scale_log2, -lse_t[qi]));
                if (masked) {
                    const int qc = q0 + qi, key = e < 2 ? key0 : key1;
                    if (!tc_visible(a, b, qc, key, tc_segment(a, b, qc)))
                        pe = 0.0f;
                }
                p[e] = pe;
                ds[e] = pe * (dpt[n][e] - D_t[qi]);
            }
            pk[n][0] = tc_pack_bf16(p[0], p[1]);
            pk[n][1] = tc_pack_bf16(p[2], p[3]);
            dsk[n][0] = tc_pack_bf16(ds[0], ds[1]);
            dsk[n][1] = tc_pack_bf16(ds[2], ds[3]);
        }

        /* dV += P^T dO, dK += dS^T Q: 16 queries a step */
        ft_wgmma_pin(dva);
        ft_wgmma_pin(dka);
        ft_wgmma_fence();
#pragma unroll
        for (int j = 0; j < NQ / 2; j++) {
            ft_wgmma_rs<HDMAX, 1>(&dva[0][0], &pk[2 * j][0], wg_desc_mn<BQ>(dot_addr, 16 * j), 1);
            ft_wgmma_rs<HDMAX, 1>(&dka[0][0], &dsk[2 * j][0], wg_desc_mn<BQ>(qt_addr, 16 * j), 1);
        }
        ft_wgmma_commit();
        ft_wgmma_wait<0>();
        ft_wgmma_pin(dva);
        ft_wgmma_pin(dka);
        ft_wgmma_pin(pk);
        ft_wgmma_pin(dsk);
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
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / a.group, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const size_t tok = (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    const uint16_t *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const uint16_t *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const int nkt = (q0 + qn - 1) / BK + 1;
    const int2 qr = tc_segment_range(a, b, q0, qn);
    int kt = tc_next_key_tile<BK>(a, b, qr, tc_first_key_tile(a, q0, BK) - 1, nkt);
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
                    float pe = tc_exp2(fmaf(s[n][e], a.scale_log2, -(e < 2 ? lse0 : lse1)));
                    if (masked) {
                        const int col = k0 + n * 8 + 2 * t + (e & 1);
                        if (!(e < 2 ? tc_visible(a, b, r0, col, seg0)
                                    : tc_visible(a, b, r1, col, seg1)))
                            pe = 0.0f;
                    }
                    s[n][e] = pe * (dp[n][e] - (e < 2 ? D0 : D1));
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

template <int HDMAX, typename OT>
static cudaError_t wg_bwd_run(OT *dq, OT *dk, OT *dv, const uint16_t *dout, const float *lse,
                              const float *Dv, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    typedef WgBwdCfg<HDMAX> C;
    void (*kkv)(OT *, OT *, const uint16_t *, const float *, const float *, const uint16_t *,
                const uint16_t *, const uint16_t *, TcArgs, int) = wg_bwd_dkdv_kernel<HDMAX, OT>;
    cudaError_t e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem_dkdv);
    if (e != cudaSuccess)
        return e;
    dim3 gkv((unsigned)((s.seq_len + C::BKV - 1) / C::BKV), (unsigned)s.n_kv_heads,
             (unsigned)s.batch);
    FT_LAUNCH(kkv, gkv, WG_THREADS, C::smem_dkdv, st)(dk, dv, dout, lse, Dv, q, k, v, a,
                                                      s.n_heads);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    void (*kq)(OT *, const uint16_t *, const float *, const float *, const uint16_t *,
               const uint16_t *, const uint16_t *, TcArgs, int) = wg_bwd_dq_kernel<HDMAX, OT>;
    e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::smem_dq);
    if (e != cudaSuccess)
        return e;
    dim3 gq((unsigned)((s.seq_len + C::BQ_DQ - 1) / C::BQ_DQ), (unsigned)s.n_heads,
            (unsigned)s.batch);
    FT_LAUNCH(kq, gq, WG_THREADS, C::smem_dq, st)(dq, dout, lse, Dv, q, k, v, a, s.n_heads);
    return cudaGetLastError();
}

/* FTMPI_TC_BWD_WGMMA=1 selects this backward where it applies: the deterministic two
 * passes (not FTMPI_ATTENTION_NONDETERMINISTIC=1's one pass), head_dim <= 128, and a
 * device and build that take wgmma (wg_device_takes). Opt-in until a GPU has timed it
 * (bench/gpu_attention.sh). Read per call, so a test can switch it. */
extern "C" int ft_cuda_attention_tc_bwd_wgmma(ft_attn_shape s)
{
    const char *e = getenv("FTMPI_TC_BWD_WGMMA"), *nd = getenv("FTMPI_ATTENTION_NONDETERMINISTIC");
    if (!e || strcmp(e, "1") != 0 || s.head_dim > 128 || (nd && strcmp(nd, "1") == 0))
        return 0;
    const size_t kv = s.head_dim <= 64 ? WgBwdCfg<64>::smem_dkdv : WgBwdCfg<128>::smem_dkdv;
    const size_t dq = s.head_dim <= 64 ? WgBwdCfg<64>::smem_dq : WgBwdCfg<128>::smem_dq;
    return wg_device_takes(kv > dq ? kv : dq);
}

cudaError_t tc_bwd_wgmma(float *dq, float *dk, float *dv, const uint16_t *dout, const float *lse,
                         const float *Dv, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                         const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64 ? wg_bwd_run<64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st)
                            : wg_bwd_run<128>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st);
}

cudaError_t tc_bwd_wgmma(ft_bf16 *dq, ft_bf16 *dk, ft_bf16 *dv, const uint16_t *dout,
                         const float *lse, const float *Dv, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64 ? wg_bwd_run<64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st)
                            : wg_bwd_run<128>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st);
}
