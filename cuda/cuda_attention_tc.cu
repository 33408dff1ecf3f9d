/* Flash attention forward on tensor cores (sm_80+): bf16 q, k, v; fp32 scores, softmax
 * statistics and accumulator; the output stored as fp32 or bf16 (template OT: the bf16
 * recipe's attention, cuda_attention_route.c), rounded once; the FlashAttention-2 work
 * split.
 *
 * Notation as in cuda_attention.cu: s_ij = scale q_i.k_j, query i sees key j iff j <= i,
 * segment[j] == segment[i] and, with a sliding window W > 0, j > i - W;
 * o_i = sum_j softmax_j(s_ij) v_j, lse_i = ln sum_j e^s_ij.
 *
 * Work split. One block of 4 warps per (BQ-query tile, head, batch row); warp w owns MT
 * m-tiles of 16 query rows (BQ = 64 MT: MT = 2 up to head_dim 128, 1 at 256, TcFwdCfg)
 * for the whole pass (its O accumulator and its softmax statistics stay in registers: no
 * atomics, no inter-warp reduction). The block walks the key tiles from the first inside
 * the window (tc_first_key_tile) up to the diagonal (causal bound), BK keys at a time (64;
 * 32 at head_dim 256; other sizes by the switches at the dispatch, below),
 * skipping tiles whose documents cannot meet its own (tc_segments_meet), staged in
 * shared memory by cp.async with double buffering: the next tile to be visited is in
 * flight while the current one is used. A warp none of whose rows sees the tile skips
 * it; the visibility rule is evaluated per element only on the tiles that need it (the
 * diagonal, the window's edge, document boundaries, the end of the sequence): elsewhere
 * the softmax is the bare arithmetic.
 *
 * Per key tile, per warp (fragments in cuda_mma.cuh's notation):
 *   S = Q K^T     Q fragments (ldmatrix.x4 of the Q tile; held in registers where they
 *                 fit, else reloaded per k-step), K^T fragments two key groups at a time
 *                 (ldmatrix.x4 of K rows: K row-major is K^T's "col" layout), each used
 *                 by all MT m-tiles; fp32 acc
 *   mask (where needed), online softmax in base 2 on S's accumulator registers with the
 *                 scale folded into the exponent's FMA, 2^(s c - m'): each lane holds two
 *                 rows (g, g+8) x two columns per 8-key group; row max and sum over the
 *                 four lanes of a quad (shuffles xor 1, 2); O's rescale by 2^(m - m')
 *                 skipped where it would multiply by exactly one (no row's maximum of
 *                 the warp moved: most tiles once a row has seen its largest scores)
 *   O += P V      P re-packed to bf16 A fragments straight from S's registers (the
 *                 accumulator layout of two 8-key groups is the A layout of 16 keys), V
 *                 fragments two feature groups at a time by ldmatrix.x4.trans of V rows
 *                 (row-major K x N), each used by all MT m-tiles
 * Shared-memory traffic per mma is what bounds an mma.sync kernel: with MT = 2 and the
 * x4 loads a warp reads 160 bytes of fragments per m16n8k16 product at head_dim 128,
 * against 256 with one m-tile and x2 loads.
 * Shared memory rows are padded by 8 bf16 (16 bytes) so that the 8 rows an ldmatrix
 * phase reads fall in distinct bank groups.
 *
 * Requirements: head_dim a multiple of 8 and at most 256 (cp.async moves 16-byte
 * chunks of a head's row; real models use 64, 80, 96, 128, 256); the caller falls back to
 * the fp32 kernel otherwise. */
#include "cuda_attention_tc.cuh"

#include <stdlib.h>
#include <string.h>

#ifdef FT_CUDA_EMULATION
unsigned long long ft_cuda_attention_tc_tiles[FT_TC_COUNTERS];
#endif

/* [min, max] segment id of every granule of TC_GRAN tokens (clipped to seq) of every row. */
__global__ void tc_seg_range_kernel(int2 *range, const int32_t *segment, int batch, int seq,
                                    int ngran)
{
    size_t total = (size_t)batch * ngran, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int b = (int)(i / ngran), t0 = (int)(i % ngran) * TC_GRAN;
        const int32_t *s = segment + (size_t)b * seq;
        int lo = INT_MAX, hi = INT_MIN;
        for (int t = t0; t < min(t0 + TC_GRAN, seq); t++) {
            lo = min(lo, s[t]);
            hi = max(hi, s[t]);
        }
        range[i] = make_int2(lo, hi);
    }
}

cudaError_t tc_seg_ranges(const TcArgs &a, int batch, cudaStream_t st)
{
    if (!a.segment)
        return cudaSuccess;
    size_t total = (size_t)batch * a.ngran;
    FT_LAUNCH(tc_seg_range_kernel, ft_cuda_grid_for(total, 256), 256, 0, st)
    ((int2 *)a.seg_range, a.segment, batch, a.seq, a.ngran);
    return cudaGetLastError();
}

/* OT: the output's storage, float or ft_bf16 (rounded once from the fp32 accumulator) */
template <int HDMAX, int BK, int MT, typename OT>
__global__ void __launch_bounds__(TC_THREADS)
    attn_fwd_tc_kernel(OT *__restrict__ out, float *__restrict__ lse,
                       const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                       const uint16_t *__restrict__ v, TcArgs a)
{
    typedef TcFwdCfg<HDMAX, BK, MT> C;
    constexpr int P = C::PITCH, BQ = C::BQ, KS = HDMAX / 16, NT = BK / 8, DT = HDMAX / 8;
    constexpr int WR = 16 * MT; /* query rows per warp */
    FT_DYNAMIC_SMEM(uint16_t, smem);
    uint16_t *Qs = smem;           /* [BQ][P] */
    uint16_t *Ks = Qs + BQ * P;    /* [2][BK][P] */
    uint16_t *Vs = Ks + 2 * BK * P; /* [2][BK][P] */

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    /* key tiles [first in the window, diagonal], those meeting the query tile's documents */
    const TcQueryBlock blk = tc_query_block<BQ, BK>(a);
    const int h = blk.h, b = blk.b, q0 = blk.q0, qn = blk.qn, nkt = blk.nkt;
    const int2 qr = blk.qr;
    int kt = blk.kt;
    const uint16_t *qb = q + blk.q_off, *kb = k + blk.kv_off, *vb = v + blk.kv_off;
    tc_stage<HDMAX, BQ>(Qs, qb, a.q_stride, q0, qn, a.hd);
    if (kt < nkt)
        tc_stage_kv<HDMAX, BK>(Ks, Vs, kb, vb, a, kt);
    ft_cp_async_commit();

    /* this warp's rows [w0, w0 + WR) (absolute) and their documents */
    const int w0 = q0 + warp * WR;
    const int2 wr = tc_warp_segment_range(a, b, w0, min(WR, a.seq - w0));

    uint32_t qa[C::Q_IN_REGS ? MT : 1][C::Q_IN_REGS ? KS : 1][4];
    float o[MT][DT][4], mx[MT][2], l[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        mx[m][0] = mx[m][1] = -INFINITY;
        l[m][0] = l[m][1] = 0.0f;
#pragma unroll
        for (int d = 0; d < DT; d++)
            o[m][d][0] = o[m][d][1] = o[m][d][2] = o[m][d][3] = 0.0f;
    }

    for (int it = 0; kt < nkt; it++) { /* it: visited tiles so far, kt: this one */
        const int k0 = kt * BK, kn = min(BK, a.seq - k0), buf = it & 1;
        ft_cp_async_wait<0>();
        __syncthreads(); /* tile kt visible to all; everyone is done with the previous one */
        TC_COUNT_TILE(0);
        if constexpr (C::Q_IN_REGS) {
            if (it == 0)
#pragma unroll
                for (int m = 0; m < MT; m++)
#pragma unroll
                    for (int ks = 0; ks < KS; ks++)
                        ft_ldmatrix<4, false>(qa[m][ks], Qs + tc_a_frag_row(warp * WR + 16 * m,
                                                                            lane, P) + ks * 16);
        }
        const int kt_next = tc_next_key_tile<BK>(a, b, qr, kt, nkt);
        if (kt_next < nkt) /* prefetch the next tile into the other buffer */
            tc_stage_kv<HDMAX, BK>(Ks + (buf ^ 1) * BK * P, Vs + (buf ^ 1) * BK * P, kb, vb, a,
                                   kt_next);
        ft_cp_async_commit();
        kt = kt_next;
        /* Warp-uniform: a warp none of whose rows sees any key of the tile skips it (it
         * would add exact zeros); the mask is evaluated per element only where needed */
        const int cls = tc_pair_class(a, w0, WR, wr, k0, BK, tc_segment_range(a, b, k0, kn));
        if (cls == TC_SKIP)
            continue;
        const bool masked = cls == TC_MASKED;
        TC_COUNT_WARP_TILE(3, masked);
        const uint16_t *Kt = Ks + buf * BK * P, *Vt = Vs + buf * BK * P;

        /* S = Q K^T: this warp's WR rows x BK keys; each K fragment pair (ldmatrix.x4:
         * key groups n, n+1) serves all MT m-tiles */
        float s[MT][NT][4];
        uint32_t pk[MT][NT][2]; /* P as bf16 pairs: rows g and g + 8 of each key group */
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int n = 0; n < NT; n++)
                s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
        /* k-step ks's fragments: Q's MT A fragments (from registers or reloaded) and K's
         * NT/2 B fragment pairs. Where registers allow (C::K_AHEAD) a whole k-step's are
         * loaded one k-step ahead of their products, two sets alternating, so that the
         * shared-memory latency hides behind the current k-step's MMAs instead of stalling
         * them; else Q's at the k-step's start and each K pair just before its products. */
        constexpr int SETS = C::K_AHEAD ? 2 : 1;
        uint32_t qf[SETS][MT][4], kf[SETS][NT / 2][4];
        auto load_q = [&](int ks, int set) {
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if constexpr (C::Q_IN_REGS) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        qf[set][m][i] = qa[m][ks][i];
                } else { /* reloaded from the tile */
                    const int off = tc_a_frag_row(warp * WR + 16 * m, lane, P) + ks * 16;
                    ft_ldmatrix<4, false>(qf[set][m], Qs + off);
                }
            }
        };
        auto load_k = [&](int ks, int set, int n) { /* key groups n, n + 1 */
            ft_ldmatrix<4, false>(kf[set][n / 2], Kt + tc_bt_pair_row(n * 8, lane, P) + ks * 16);
        };
        if constexpr (C::K_AHEAD) {
            load_q(0, 0);
#pragma unroll
            for (int n = 0; n < NT; n += 2)
                load_k(0, 0, n);
        }
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            const int set = C::K_AHEAD ? ks & 1 : 0;
            if constexpr (C::K_AHEAD) {
                if (ks + 1 < KS) {
                    load_q(ks + 1, set ^ 1);
#pragma unroll
                    for (int n = 0; n < NT; n += 2)
                        load_k(ks + 1, set ^ 1, n);
                }
            } else {
                load_q(ks, 0);
            }
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                if constexpr (!C::K_AHEAD)
                    load_k(ks, 0, n);
#pragma unroll
                for (int m = 0; m < MT; m++)
                    tc_mma_pair(s[m][n], s[m][n + 1], qf[set][m], kf[set][n / 2]);
            }
        }

        /* the visibility rule, on the tiles that need it; the online softmax */
        if (masked)
#pragma unroll
            for (int m = 0; m < MT; m++)
                tc_mask_rows<NT>(s[m], a, b, w0 + 16 * m, k0);
        float alpha[MT][2];
        bool moved = false; /* some row's rescale would change its O (below) */
#pragma unroll
        for (int m = 0; m < MT; m++)
            moved |= tc_online_softmax<NT>(s[m], pk[m], mx[m], l[m], alpha[m], a.scale_log2);
        /* Where a row's running maximum did not move, its rescale changes nothing: alpha =
         * 2^0 = 1 exactly, or the row has seen nothing yet (m = -inf, alpha 0) and its O
         * is still +0. The warp skips the MT x HDMAX / 2 multiplies when that holds for all
         * of its rows (past a row's first tiles, most of the time), changing no bit. */
        if (__any_sync(FT_FULL_MASK, moved)) {
#pragma unroll
            for (int m = 0; m < MT; m++)
                tc_rescale_o<DT>(o[m], alpha[m]);
        } else {
            TC_COUNT_WARP(9);
        }

        /* O += P V: 16 keys (two 8-key groups of S, repacked from its registers as the A
         * operand) per k-step; each V fragment pair (ldmatrix.x4.trans: feature groups d,
         * d+1) serves all MT m-tiles */
#pragma unroll
        for (int j = 0; j < BK / 16; j++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int m = 0; m < MT; m++) {
                pa[m][0] = pk[m][2 * j][0];
                pa[m][1] = pk[m][2 * j][1];
                pa[m][2] = pk[m][2 * j + 1][0];
                pa[m][3] = pk[m][2 * j + 1][1];
            }
#pragma unroll
            for (int d = 0; d < DT; d += 2) {
                uint32_t vf[4];
                ft_ldmatrix<4, true>(vf, Vt + tc_b_pair_row(j * 16, d * 8, lane, P));
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    tc_mma_pair(o[m][d], o[m][d + 1], pa[m], vf);
                }
            }
        }
    }
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */

    OT *ob = out + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    float *lb = lse + ((size_t)b * gridDim.y + h) * a.seq;
#pragma unroll
    for (int m = 0; m < MT; m++)
        tc_store_out_rows<DT>(ob, lb, o[m], mx[m], l[m], w0 + 16 * m, a);
}

template <int HDMAX, int BK, int MT, typename OT>
static cudaError_t tc_fwd_run(OT *out, float *lse, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    typedef TcFwdCfg<HDMAX, BK, MT> C;
    void (*kern)(OT *, float *, const uint16_t *, const uint16_t *, const uint16_t *, TcArgs) =
        attn_fwd_tc_kernel<HDMAX, BK, MT, OT>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem);
    if (e != cudaSuccess)
        return e;
    dim3 grid((unsigned)((s.seq_len + C::BQ - 1) / C::BQ), (unsigned)s.n_heads,
              (unsigned)s.batch);
    FT_LAUNCH(kern, grid, TC_THREADS, C::smem, st)(out, lse, q, k, v, a);
    return cudaGetLastError();
}

extern "C" int ft_cuda_attention_tc_supported(ft_attn_shape s)
{
    return s.head_dim > 0 && s.head_dim <= 256 && s.head_dim % 8 == 0;
}

/* Query rows per warp of the forward at head_dim 65-128: 32 (two m-tiles, the default:
 * 160 bytes of fragments read from shared memory per product; ptxas for sm_90: 255
 * registers and a 64-byte spill) or 16 (one m-tile: 256 bytes per product; 225
 * registers, no spill). Which is faster on a given GPU is a measurement:
 * FTMPI_TC_FWD_ROWS=16 selects the second, so that bench/gpu_attention.sh times both in
 * one run. Read per call (a getenv beside a kernel launch), so a test can switch it. */
static int tc_fwd_rows_per_warp(void)
{
    const char *e = getenv("FTMPI_TC_FWD_ROWS");
    return e && strcmp(e, "16") == 0 ? 16 : 32;
}

/* Keys per tile of the forward, FTMPI_TC_FWD_KEYS: at head_dim <= 64, 64 (the default) or
 * 128 (FlashAttention-2's tile at that size: the per-tile costs, the barrier, the row
 * maxima and sums across the quad, the rescale of O, spread over twice the keys; Q's
 * fragments reloaded per k-step as S's 128 registers leave no room to hold them, and
 * ptxas for sm_90 still spills 76 bytes, a few scalar loads and stores a tile); at
 * head_dim 65-128, 64 (the default) or 32 (S's 32 registers fewer leave room to load the
 * fragments a k-step ahead, TcFwdCfg::K_AHEAD, which the 64-key tile cannot without
 * spilling, for twice the per-tile costs). Which is faster is a measurement:
 * bench/gpu_attention.sh times each beside the default in one run. Read per call, as
 * above. */
static int tc_fwd_keys_per_tile(void)
{
    const char *e = getenv("FTMPI_TC_FWD_KEYS");
    return !e ? 64 : strcmp(e, "128") == 0 ? 128 : strcmp(e, "32") == 0 ? 32 : 64;
}

template <typename OT>
static cudaError_t tc_fwd_dispatch(OT *out, float *lse, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const TcArgs &a, ft_attn_shape s,
                                   cudaStream_t st)
{
    if (ft_cuda_attention_tc_fwd_wgmma(s))
        return tc_fwd_wgmma(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 64 && tc_fwd_keys_per_tile() == 128)
        return tc_fwd_run<64, 128, 2>(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 64)
        return tc_fwd_run<64, 64, 2>(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 128 && tc_fwd_rows_per_warp() == 16)
        return tc_fwd_run<128, 64, 1>(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 128 && tc_fwd_keys_per_tile() == 32)
        return tc_fwd_run<128, 32, 2>(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 128)
        return tc_fwd_run<128, 64, 2>(out, lse, q, k, v, a, s, st);
    return tc_fwd_run<256, 32, 1>(out, lse, q, k, v, a, s, st);
}

extern "C" size_t ft_cuda_attention_fwd_bf16_scratch_bytes(ft_attn_shape s)
{
    return tc_seg_range_bytes(s);
}

extern "C" cudaError_t ft_cuda_launch_attention_fwd_bf16(ft_dtype out_dt, void *out, float *lse,
                                                         const uint16_t *q, const uint16_t *k,
                                                         const uint16_t *v,
                                                         const int32_t *segment, ft_attn_shape s,
                                                         void *scratch, cudaStream_t st)
{
    if (s.batch <= 0 || s.seq_len <= 0)
        return cudaSuccess;
    if (!ft_cuda_attention_tc_supported(s))
        return cudaErrorInvalidValue;
    TcArgs a = tc_args(s, segment, scratch);
    cudaError_t e = tc_seg_ranges(a, s.batch, st);
    if (e != cudaSuccess)
        return e;
    if (out_dt == FT_DTYPE_BF16)
        return tc_fwd_dispatch((ft_bf16 *)out, lse, q, k, v, a, s, st);
    return tc_fwd_dispatch((float *)out, lse, q, k, v, a, s, st);
}
