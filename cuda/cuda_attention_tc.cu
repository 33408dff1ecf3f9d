/* Flash attention forward on tensor cores (sm_80+): bf16 q, k, v; fp32 scores, softmax
 * statistics and accumulator; the output stored as fp32 or bf16 (template OT: the bf16
 * recipe's attention, cuda_attention_route.c), rounded once; the FlashAttention-2 work
 * split.
 *
 * Notation as in cuda_attention.cu: s_ij = scale q_i.k_j, query i sees key j iff j <= i,
 * segment[j] == segment[i] and, with a sliding window W > 0, j > i - W;
 * o_i = sum_j softmax_j(s_ij) v_j, lse_i = ln sum_j e^s_ij.
 *
 * Work split. One block of 4 warps per (64-query tile, head, batch row); warp w owns query
 * rows 16w .. 16w+15 of the tile for the whole pass (its O accumulator and its softmax
 * statistics stay in registers: no atomics, no inter-warp reduction). The block walks the
 * key tiles from the first inside the window (tc_first_key_tile) up to the diagonal
 * (causal bound), BK keys at a time, skipping tiles whose documents cannot meet its own
 * (tc_segments_meet), staged in shared memory by cp.async with double buffering: the
 * next tile to be visited is in flight while the current one is used.
 *
 * Per key tile, per warp (fragments in cuda_mma.cuh's notation):
 *   S = Q K^T     Q fragments (ldmatrix.x4 of the Q tile, loaded once; at head_dim 256
 *                 once per k-step, Q_IN_REGS), K^T fragments (ldmatrix.x2 of K rows: K
 *                 row-major is K^T's "col" layout); fp32 acc
 *   mask, online softmax in base 2 on S's accumulator registers: each lane holds two
 *                 rows (g, g+8) x two columns per 8-key group; row max and sum over the
 *                 four lanes of a quad (shuffles xor 1, 2)
 *   O += P V      P re-packed to bf16 A fragments straight from S's registers (the
 *                 accumulator layout of two 8-key groups is the A layout of 16 keys), V
 *                 fragments by ldmatrix.x2.trans of V rows (row-major K x N)
 * Shared memory rows are padded by 8 bf16 (16 bytes) so that the 8 rows an ldmatrix
 * phase reads fall in distinct bank groups.
 *
 * Requirements: head_dim a multiple of 8 and at most 256 (cp.async moves 16-byte
 * chunks of a head's row; real models use 64, 80, 96, 128, 256); the caller falls back to
 * the fp32 kernel otherwise. */
#include "cuda_attention_tc.cuh"

#ifdef FT_CUDA_EMULATION
unsigned long long ft_cuda_attention_tc_tiles[3];
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

/* The first key tile after `after` and before `end` whose documents may meet the query
 * tile's (range qr); `end` when none. Block-uniform. */
template <int BK>
__device__ __forceinline__ int tc_next_key_tile(const TcArgs &a, int b, int2 qr, int after,
                                                int end)
{
    int kt = after + 1;
    while (kt < end && !tc_segments_meet(a, b, qr, kt * BK, min(BK, a.seq - kt * BK)))
        kt++;
    return kt;
}

/* OT: the output's storage, float or ft_bf16 (rounded once from the fp32 accumulator) */
template <int HDMAX, int BK, typename OT>
__global__ void __launch_bounds__(TC_THREADS)
    attn_fwd_tc_kernel(OT *__restrict__ out, float *__restrict__ lse,
                       const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                       const uint16_t *__restrict__ v, TcArgs a)
{
    typedef TcCfg<HDMAX, BK> C;
    constexpr int P = C::PITCH, KS = HDMAX / 16, NT = BK / 8, DT = HDMAX / 8;
    FT_DYNAMIC_SMEM(uint16_t, smem);
    uint16_t *Qs = smem;                 /* [BQ][P] */
    uint16_t *Ks = Qs + TC_BQ * P;       /* [2][BK][P] */
    uint16_t *Vs = Ks + 2 * BK * P;      /* [2][BK][P] */

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;
    const int nqt = (a.seq + TC_BQ - 1) / TC_BQ;
    const int qt = nqt - 1 - (int)blockIdx.x; /* the longest rows first */
    const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int q0 = qt * TC_BQ, qn = min(TC_BQ, a.seq - q0);
    const uint16_t *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    const uint16_t *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;
    const uint16_t *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * a.hd;

    /* key tiles [first in the window, diagonal], those meeting the query tile's documents */
    const int nkt = (q0 + qn - 1) / BK + 1;
    const int2 qr = tc_segment_range(a, b, q0, qn);
    int kt = tc_next_key_tile<BK>(a, b, qr, tc_first_key_tile(a, q0, BK) - 1, nkt);
    tc_stage<HDMAX, TC_BQ>(Qs, qb, a.q_stride, q0, qn, a.hd);
    if (kt < nkt) {
        tc_stage<HDMAX, BK>(Ks, kb, a.kv_stride, kt * BK, min(BK, a.seq - kt * BK), a.hd);
        tc_stage<HDMAX, BK>(Vs, vb, a.kv_stride, kt * BK, min(BK, a.seq - kt * BK), a.hd);
    }
    ft_cp_async_commit();

    /* this lane's two query rows (absolute) and their segments */
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const int seg0 = tc_segment(a, b, r0), seg1 = tc_segment(a, b, r1);

    /* Q's A fragments stay in registers, except at head_dim 256, where they (64 registers)
     * next to O's 128 would spill: there each k-step reloads them from the Q tile, which
     * stays in shared memory for the whole pass. */
    constexpr bool Q_IN_REGS = HDMAX < 256;
    uint32_t qa[Q_IN_REGS ? KS : 1][4];
    float o[DT][4];
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
#pragma unroll
    for (int d = 0; d < DT; d++)
        o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;

    for (int it = 0; kt < nkt; it++) { /* it: visited tiles so far, kt: this one */
        const int k0 = kt * BK, buf = it & 1;
        ft_cp_async_wait<0>();
        __syncthreads(); /* tile kt visible to all; everyone is done with the previous one */
        TC_COUNT_TILE(0);
        if constexpr (Q_IN_REGS) {
            if (it == 0) {
#pragma unroll
                for (int ks = 0; ks < KS; ks++)
                    ft_ldmatrix<4, false>(qa[ks], Qs + (warp * 16 + lane % 16) * P + ks * 16 +
                                                      8 * (lane / 16));
            }
        }
        const int kt_next = tc_next_key_tile<BK>(a, b, qr, kt, nkt);
        if (kt_next < nkt) { /* prefetch the next tile into the other buffer */
            int nk0 = kt_next * BK;
            tc_stage<HDMAX, BK>(Ks + (buf ^ 1) * BK * P, kb, a.kv_stride, nk0,
                                min(BK, a.seq - nk0), a.hd);
            tc_stage<HDMAX, BK>(Vs + (buf ^ 1) * BK * P, vb, a.kv_stride, nk0,
                                min(BK, a.seq - nk0), a.hd);
        }
        ft_cp_async_commit();
        const uint16_t *Kt = Ks + buf * BK * P, *Vt = Vs + buf * BK * P;

        /* S = Q K^T, this warp's 16 rows x BK keys */
        float s[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t qf[4];
            if constexpr (Q_IN_REGS) {
#pragma unroll
                for (int i = 0; i < 4; i++)
                    qf[i] = qa[ks][i];
            } else { /* reloaded from the tile */
                ft_ldmatrix<4, false>(qf, Qs + (warp * 16 + lane % 16) * P + ks * 16 +
                                              8 * (lane / 16));
            }
#pragma unroll
            for (int n = 0; n < NT; n++) {
                uint32_t kf[2];
                ft_ldmatrix<2, false>(kf, Kt + (n * 8 + lane % 8) * P + ks * 16 +
                                              8 * ((lane / 8) % 2));
                ft_mma_m16n8k16_bf16(s[n], qf, kf, s[n]);
            }
        }

        /* mask, scale to base 2, online softmax for rows r0 (s[.][0..1]) and r1 ([2..3]) */
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int col = k0 + n * 8 + 2 * t + (e & 1);
                bool vis = e < 2 ? tc_visible(a, b, r0, col, seg0)
                                 : tc_visible(a, b, r1, col, seg1);
                float x = vis ? s[n][e] * a.scale_log2 : -INFINITY;
                s[n][e] = x;
                if (e < 2)
                    mx0 = fmaxf(mx0, x);
                else
                    mx1 = fmaxf(mx1, x);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(FT_FULL_MASK, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(FT_FULL_MASK, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(FT_FULL_MASK, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(FT_FULL_MASK, mx1, 2));
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        /* a row that has seen nothing keeps m = -inf: reference 0 avoids inf - inf */
        const float ref0 = mn0 == -INFINITY ? 0.0f : mn0, ref1 = mn1 == -INFINITY ? 0.0f : mn1;
        const float al0 = exp2f(m0 - ref0), al1 = exp2f(m1 - ref1);
        m0 = mn0;
        m1 = mn1;
        float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            s[n][0] = exp2f(s[n][0] - ref0);
            s[n][1] = exp2f(s[n][1] - ref0);
            s[n][2] = exp2f(s[n][2] - ref1);
            s[n][3] = exp2f(s[n][3] - ref1);
            sum0 += s[n][0] + s[n][1];
            sum1 += s[n][2] + s[n][3];
        }
        sum0 += __shfl_xor_sync(FT_FULL_MASK, sum0, 1);
        sum0 += __shfl_xor_sync(FT_FULL_MASK, sum0, 2);
        sum1 += __shfl_xor_sync(FT_FULL_MASK, sum1, 1);
        sum1 += __shfl_xor_sync(FT_FULL_MASK, sum1, 2);
        l0 = l0 * al0 + sum0;
        l1 = l1 * al1 + sum1;
#pragma unroll
        for (int d = 0; d < DT; d++) {
            o[d][0] *= al0;
            o[d][1] *= al0;
            o[d][2] *= al1;
            o[d][3] *= al1;
        }

        /* O += P V: 16 keys (two 8-key groups of S) per k-step */
#pragma unroll
        for (int j = 0; j < BK / 16; j++) {
            uint32_t pa[4] = {tc_pack_bf16(s[2 * j][0], s[2 * j][1]),
                              tc_pack_bf16(s[2 * j][2], s[2 * j][3]),
                              tc_pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]),
                              tc_pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
            for (int d = 0; d < DT; d++) {
                uint32_t vf[2];
                ft_ldmatrix<2, true>(vf, Vt + (j * 16 + lane % 16) * P + d * 8);
                ft_mma_m16n8k16_bf16(o[d], pa, vf, o[d]);
            }
        }
        kt = kt_next;
    }
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */

    /* o / l; lse = ln 2 (m + log2 l); rows that saw nothing: 0 and -inf */
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    OT *ob = out + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
#pragma unroll
    for (int d = 0; d < DT; d++) {
        int c = d * 8 + 2 * t;
        if (c >= a.hd)
            continue;
        if (r0 < a.seq) {
            ft_st(ob, (size_t)r0 * a.q_stride + c, o[d][0] * inv0);
            ft_st(ob, (size_t)r0 * a.q_stride + c + 1, o[d][1] * inv0);
        }
        if (r1 < a.seq) {
            ft_st(ob, (size_t)r1 * a.q_stride + c, o[d][2] * inv1);
            ft_st(ob, (size_t)r1 * a.q_stride + c + 1, o[d][3] * inv1);
        }
    }
    if (t == 0) {
        float *lb = lse + ((size_t)b * gridDim.y + h) * a.seq;
        if (r0 < a.seq)
            lb[r0] = l0 > 0.0f ? TC_LN2 * (m0 + log2f(l0)) : -INFINITY;
        if (r1 < a.seq)
            lb[r1] = l1 > 0.0f ? TC_LN2 * (m1 + log2f(l1)) : -INFINITY;
    }
}

template <int HDMAX, int BK, typename OT>
static cudaError_t tc_fwd_run(OT *out, float *lse, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    typedef TcCfg<HDMAX, BK> C;
    void (*kern)(OT *, float *, const uint16_t *, const uint16_t *, const uint16_t *, TcArgs) =
        attn_fwd_tc_kernel<HDMAX, BK, OT>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem);
    if (e != cudaSuccess)
        return e;
    dim3 grid((unsigned)((s.seq_len + TC_BQ - 1) / TC_BQ), (unsigned)s.n_heads,
              (unsigned)s.batch);
    FT_LAUNCH(kern, grid, TC_THREADS, C::smem, st)(out, lse, q, k, v, a);
    return cudaGetLastError();
}

extern "C" int ft_cuda_attention_tc_supported(ft_attn_shape s)
{
    return s.head_dim > 0 && s.head_dim <= 256 && s.head_dim % 8 == 0;
}

template <typename OT>
static cudaError_t tc_fwd_dispatch(OT *out, float *lse, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const TcArgs &a, ft_attn_shape s,
                                   cudaStream_t st)
{
    if (s.head_dim <= 64)
        return tc_fwd_run<64, 64>(out, lse, q, k, v, a, s, st);
    if (s.head_dim <= 128)
        return tc_fwd_run<128, 64>(out, lse, q, k, v, a, s, st);
    return tc_fwd_run<256, 32>(out, lse, q, k, v, a, s, st);
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
