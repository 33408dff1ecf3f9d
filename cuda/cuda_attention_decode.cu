/* Attention of new tokens against a key/value cache (incremental decoding), fp32.
 *
 * For new token i (absolute position p = past + i) and query head h, with kv head
 * g = h / (n_heads / n_kv_heads) and scale = 1/sqrt(head_dim):
 *   s_j = k_j . (scale q)      for every cached key j <= p (and, with a sliding
 *                              window W > 0, j > p - W: the keys start at first)
 *   m   = max_j s_j,   w_j = exp(s_j - m),   l = sum_j w_j
 *   o   = (sum_j w_j v_j) / l
 * The scale is folded into q before the dot products, like the CPU kernels.
 *
 * One block of DEC_THREADS threads per (token, head). Decoding has one query row
 * and a long key row, so the block streams the keys three times:
 *   1. scores: warp w takes keys w, w + nwarps, ...; its lanes split the head
 *      dimension and a shuffle reduction gives s_j, stored in the caller's
 *      scratch row [n_keys] (global memory: the row can be longer than shared
 *      memory allows);
 *   2. softmax: a block max, then w_j = exp(s_j - m) in place and a block sum;
 *   3. output: thread d owns feature d (and d + blockDim, ...) and sums w_j v_jd
 *      over the keys in order: loads of v_j are coalesced along d.
 * Every sum runs in an order fixed by the block shape, so results are
 * reproducible run to run. The accurate expf is used (not __expf), so values agree
 * with the CPU backend to a few ulp. */
#include "cuda_common.cuh"

#include "backend/attention_mask.h"

#define DEC_THREADS 128
#define DEC_HDMAX 256

struct DecodeArgs {
    int past, n_new, n_heads, group, hd, window;
    size_t q_stride, kv_stride, score_stride;
    float scale;
};

__global__ void __launch_bounds__(DEC_THREADS)
attention_decode_kernel(float *__restrict__ out, const float *__restrict__ q,
                        const float *__restrict__ k_cache, const float *__restrict__ v_cache,
                        float *__restrict__ scores_all, DecodeArgs a)
{
    __shared__ float qs[DEC_HDMAX];
    __shared__ float red[FT_WARP];
    const int h = blockIdx.x, i = blockIdx.y;
    const int g = h / a.group, hd = a.hd;
    const int last = a.past + i; /* the token's own position */
    const int first = ft_mask_first_key(last, a.window);
    const int n_keys = last - first + 1;
    const int lane = threadIdx.x % FT_WARP, warp = threadIdx.x / FT_WARP;
    const int nwarps = blockDim.x / FT_WARP;
    const float *qrow = q + (size_t)i * a.q_stride + (size_t)h * hd;
    float *scores = scores_all + ((size_t)i * a.n_heads + h) * a.score_stride;

    for (int d = threadIdx.x; d < hd; d += blockDim.x)
        qs[d] = __fmul_rn(qrow[d], a.scale);
    __syncthreads();

    /* 1. scores, one warp per key */
    const float *kbase = k_cache + (size_t)first * a.kv_stride + (size_t)g * hd;
    for (int j = warp; j < n_keys; j += nwarps) {
        const float *kj = kbase + (size_t)j * a.kv_stride;
        float s = 0.0f;
        for (int d = lane; d < hd; d += FT_WARP)
            s = fmaf(kj[d], qs[d], s);
        s = ft_warp_sum(s);
        if (lane == 0)
            scores[j] = s;
    }
    __syncthreads(); /* scores written by other warps are read below */

    /* 2. softmax weights */
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n_keys; j += blockDim.x)
        m = fmaxf(m, scores[j]);
    m = ft_block_max(m, red);
    float l = 0.0f;
    for (int j = threadIdx.x; j < n_keys; j += blockDim.x) {
        float w = expf(scores[j] - m);
        scores[j] = w;
        l += w;
    }
    l = ft_block_sum(l, red); /* contains the barrier that publishes the weights */
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;

    /* 3. output, one thread per feature */
    const float *vbase = v_cache + (size_t)first * a.kv_stride + (size_t)g * hd;
    float *orow = out + (size_t)i * a.q_stride + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n_keys; j++)
            acc = fmaf(scores[j], vbase[(size_t)j * a.kv_stride + d], acc);
        orow[d] = acc * inv;
    }
}

extern "C" size_t ft_cuda_attention_decode_scratch_bytes(int past, int n_new, int n_heads)
{
    if (past < 0 || n_new <= 0 || n_heads <= 0)
        return 0;
    return (size_t)n_new * (size_t)n_heads * (size_t)(past + n_new) * sizeof(float);
}

extern "C" cudaError_t ft_cuda_launch_attention_decode(float *out, const float *q,
                                                       const float *k_cache,
                                                       const float *v_cache, int past,
                                                       int n_new, int n_heads, int n_kv_heads,
                                                       int head_dim, int window, void *scratch,
                                                       cudaStream_t st)
{
    if (n_new <= 0 || n_heads <= 0 || past < 0)
        return cudaSuccess;
    if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_dim <= 0 ||
        head_dim > DEC_HDMAX || n_new > 65535)
        return cudaErrorInvalidValue;
    DecodeArgs a;
    a.past = past;
    a.n_new = n_new;
    a.n_heads = n_heads;
    a.group = n_heads / n_kv_heads;
    a.hd = head_dim;
    a.window = window > 0 ? window : 0;
    a.q_stride = (size_t)n_heads * head_dim;
    a.kv_stride = (size_t)n_kv_heads * head_dim;
    a.score_stride = (size_t)(past + n_new);
    a.scale = 1.0f / sqrtf((float)head_dim);
    dim3 grid((unsigned)n_heads, (unsigned)n_new);
    FT_LAUNCH(attention_decode_kernel, grid, DEC_THREADS, 0, st)(out, q, k_cache, v_cache,
                                                          (float *)scratch, a);
    return cudaGetLastError();
}
