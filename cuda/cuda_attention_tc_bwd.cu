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
#include "cuda_attention_tc_bwd_dkdv.cuh"
#include "cuda_attention_tc_bwd_dq.cuh"

#include <stdlib.h>
#include <string.h>

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
        return tc_device_smem_takes(s.head_dim <= 64 ? TcBwdCfg<64, 8>::smem_shared
                                                     : TcBwdCfg<128, 8>::smem_shared)
                   ? FT_TC_BWD_SHARED
                   : FT_TC_BWD_WIDE;
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
    if (!dq_acc && ft_cuda_attention_tc_bwd_wgmma(s))
        return tc_bwd_wgmma(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st);
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
