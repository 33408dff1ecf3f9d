/* Shared pieces of the tensor-core attention kernels (cuda_attention_tc.cu: forward,
 * cuda_attention_tc_bwd.cu: backward): the arguments, the tile geometry, cp.async staging
 * of a head's rows, bf16 packing and the visibility rule. */
#ifndef FT_CUDA_ATTENTION_TC_CUH
#define FT_CUDA_ATTENTION_TC_CUH

#include "cuda_common.cuh"
#include "cuda_mma.cuh"

#define TC_WARPS 4
#define TC_THREADS (TC_WARPS * 32)
#define TC_BQ 64
#define TC_PAD 8
#define TC_LOG2E 1.4426950408889634f
#define TC_LN2 0.6931471805599453f

struct TcArgs {
    int seq, hd, group;
    size_t q_stride, kv_stride; /* elements per token */
    float scale_log2;
    const int32_t *segment;
};

/* Forward tile geometry: the Q tile and two K and two V buffers of BK rows. */
template <int HDMAX, int BK>
struct TcCfg {
    static constexpr int PITCH = HDMAX + TC_PAD; /* bf16 per smem row */
    static constexpr size_t smem = (size_t)(TC_BQ + 4 * BK) * PITCH * sizeof(uint16_t);
};

/* Stages rows t0 .. t0+n-1 of one head (hd bf16 each) into dst[row][PITCH] with cp.async;
 * rows >= n and features >= hd are zero-filled. */
template <int HDMAX, int ROWS>
__device__ __forceinline__ void tc_stage(uint16_t *dst, const uint16_t *base, size_t stride,
                                         int t0, int n, int hd)
{
    constexpr int CHUNKS = HDMAX / 8; /* 16-byte chunks per row */
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += TC_THREADS) {
        int r = idx / CHUNKS, c = idx % CHUNKS;
        int d0 = c * 8;
        bool valid = r < n && d0 < hd;
        const uint16_t *src = valid ? base + (size_t)(t0 + r) * stride + d0 : base;
        ft_cp_async_16(dst + r * TcCfg<HDMAX, 8>::PITCH + d0, src, valid ? 16 : 0);
    }
}

/* Two fp32 as the bf16 pair of one mma operand register (lo in the lower half). */
__device__ __forceinline__ uint32_t tc_pack_bf16(float lo, float hi)
{
    return (uint32_t)ft_bf16_from_f32(lo) | ((uint32_t)ft_bf16_from_f32(hi) << 16);
}

static inline TcArgs tc_args(ft_attn_shape s, const int32_t *segment)
{
    TcArgs a;
    a.seq = s.seq_len;
    a.hd = s.head_dim;
    a.group = s.n_heads / s.n_kv_heads;
    a.q_stride = (size_t)s.n_heads * s.head_dim;
    a.kv_stride = (size_t)s.n_kv_heads * s.head_dim;
    a.scale_log2 = TC_LOG2E / sqrtf((float)s.head_dim);
    a.segment = segment;
    return a;
}

/* Query `row` sees key `col` (absolute positions in the batch row b). */
__device__ __forceinline__ bool tc_visible(const TcArgs &a, int b, int row, int col, int row_seg)
{
    bool vis = col <= row && col < a.seq && row < a.seq;
    if (vis && a.segment)
        vis = a.segment[(size_t)b * a.seq + col] == row_seg;
    return vis;
}

__device__ __forceinline__ int tc_segment(const TcArgs &a, int b, int t)
{
    return a.segment && t < a.seq ? a.segment[(size_t)b * a.seq + t] : 0;
}

#endif
