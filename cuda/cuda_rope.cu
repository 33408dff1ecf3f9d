/* Rotary position embedding in place (ft_rope_shape). In a head of head_dim values the
 * first rot_dim rotate, in rot_dim/2 pairs (a_i, b_i); the rest are not touched:
 *   half-split  (HF Llama/NeoX): a_i = i,   b_i = i + rot_dim/2
 *   interleaved (GPT-J):         a_i = 2i,  b_i = 2i + 1
 * With angle = pos[t] * inv_freq[i], c = cos(angle), s = sin(angle) from the tables:
 *   x'_a = x_a * c - x_b * s
 *   x'_b = x_a * s + x_b * c
 * inverse = true rotates by -angle (s -> -s): the backward of the forward.
 * One thread per pair (token, head, i); consecutive threads take consecutive i,
 * so the half-split halves are read and written coalesced (interleaved pairs are
 * adjacent, which is as good). The products and sums are rounded one by one
 * (__fmul_rn, no FMA contraction), like the CPU backend: results are bit-identical.
 * x is fp32 or bf16 (one template: widened, rotated in fp32, rounded once); the
 * angles are fp32 tables. Half-split heads whose pair count and head_dim are multiples
 * of 8, with 16-byte aligned buffers (every Llama, Qwen and Mistral shape), take the
 * 8-wide path: a thread rotates 8 consecutive pairs with 16-byte accesses (ft_ld8/ft_st8)
 * and the same arithmetic, so both paths give the same bits. */
#include "cuda_common.cuh"

#define ROPE_THREADS 256

/* One pair rotated by the angle whose cosine is c and (signed) sine s, each product and
 * sum rounded on its own: the arithmetic of both paths below. */
__device__ __forceinline__ void rope_rotate(float *a, float *b, float c, float s)
{
    float ra = __fsub_rn(__fmul_rn(*a, c), __fmul_rn(*b, s));
    float rb = __fadd_rn(__fmul_rn(*a, s), __fmul_rn(*b, c));
    *a = ra, *b = rb;
}

template <typename T>
__global__ void rope_kernel(T *__restrict__ x, const float *__restrict__ cos_table,
                            const float *__restrict__ sin_table, const int32_t *__restrict__ pos,
                            size_t pairs, int n_heads, int head_dim, int rot_dim, int interleaved,
                            float sign)
{
    int half = rot_dim / 2;
    int a_step = interleaved ? 2 : 1, b_off = interleaved ? 1 : half;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < pairs; idx += stride) {
        int i = (int)(idx % half);
        size_t th = idx / half; /* token * n_heads + head */
        size_t t = th / n_heads;
        size_t trow = (size_t)pos[t] * half;
        float c = cos_table[trow + i], s = sign * sin_table[trow + i];
        T *xh = x + th * head_dim;
        int ia = i * a_step, ib = ia + b_off;
        float a = ft_ld(xh, ia), b = ft_ld(xh, ib);
        rope_rotate(&a, &b, c, s);
        ft_st(xh, ia, a);
        ft_st(xh, ib, b);
    }
}

/* The 8-wide path of the half-split layout: item idx is the 8 pairs from i = 8 (idx % (half /
 * 8)) of head idx / (half / 8). */
template <typename T>
__global__ void rope_half_split_vec_kernel(T *__restrict__ x, const float *__restrict__ cos_table,
                                           const float *__restrict__ sin_table,
                                           const int32_t *__restrict__ pos, size_t items,
                                           int n_heads, int head_dim, int half, float sign)
{
    int groups = half / FT_VEC;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < items; idx += stride) {
        int i = (int)(idx % groups) * FT_VEC;
        size_t th = idx / groups; /* token * n_heads + head */
        size_t trow = (size_t)pos[th / n_heads] * half;
        T *xh = x + th * head_dim;
        float a[FT_VEC], b[FT_VEC], c[FT_VEC], s[FT_VEC];
        ft_ld8(xh, i, a);
        ft_ld8(xh, i + half, b);
        ft_ld8(cos_table, trow + i, c);
        ft_ld8(sin_table, trow + i, s);
#pragma unroll
        for (int e = 0; e < FT_VEC; e++)
            rope_rotate(&a[e], &b[e], c[e], sign * s[e]);
        ft_st8(xh, i, a);
        ft_st8(xh, i + half, b);
    }
}

extern "C" cudaError_t ft_cuda_launch_rope(ft_dtype dt, void *x, const float *cos_table,
                                           const float *sin_table, const int32_t *pos,
                                           int tokens, int n_heads, ft_rope_shape r, int inverse,
                                           cudaStream_t st)
{
    if (tokens <= 0 || n_heads <= 0 || r.rot_dim < 2)
        return cudaSuccess;
    size_t pairs = (size_t)tokens * (size_t)n_heads * (size_t)(r.rot_dim / 2);
    int half = r.rot_dim / 2;
    if (!r.interleaved && half % FT_VEC == 0 && r.head_dim % FT_VEC == 0 &&
        ft_aligned16(x, cos_table, sin_table)) {
        size_t items = pairs / FT_VEC;
        FT_WITH_STORAGE(dt, T,
                        FT_LAUNCH(rope_half_split_vec_kernel<T>,
                                  ft_cuda_grid_for(items, ROPE_THREADS), ROPE_THREADS, 0, st)(
                            (T *)x, cos_table, sin_table, pos, items, n_heads, r.head_dim, half,
                            inverse ? -1.0f : 1.0f));
        return cudaGetLastError();
    }
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(rope_kernel<T>, ft_cuda_grid_for(pairs, ROPE_THREADS), ROPE_THREADS,
                              0, st)((T *)x, cos_table, sin_table, pos, pairs, n_heads,
                                     r.head_dim, r.rot_dim, r.interleaved ? 1 : 0,
                                     inverse ? -1.0f : 1.0f));
    return cudaGetLastError();
}
