/* Rotary position embedding, Hugging Face half-split layout, in place.
 * Within a head of size D, dimension i < D/2 pairs with i + D/2; with
 * angle = pos[t] * inv_freq[i], c = cos(angle), s = sin(angle) from the tables:
 *   x'_i       = x_i * c - x_{i+D/2} * s
 *   x'_{i+D/2} = x_i * s + x_{i+D/2} * c
 * inverse = true rotates by -angle (s -> -s): the backward of the forward.
 * One thread per pair (token, head, i); consecutive threads take consecutive i,
 * so both halves are read and written coalesced. The products and sums are
 * rounded one by one (__fmul_rn, no FMA contraction), like the CPU backend:
 * results are bit-identical. x is fp32 or bf16 (one template: widened, rotated in fp32,
 * rounded once); the angles are fp32 tables. */
#include "cuda_common.cuh"

#define ROPE_THREADS 256

template <typename T>
__global__ void rope_kernel(T *__restrict__ x, const float *__restrict__ cos_table,
                            const float *__restrict__ sin_table, const int32_t *__restrict__ pos,
                            size_t pairs, int n_heads, int head_dim, float sign)
{
    int half = head_dim / 2;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < pairs; idx += stride) {
        int i = (int)(idx % half);
        size_t th = idx / half; /* token * n_heads + head */
        size_t t = th / n_heads;
        size_t trow = (size_t)pos[t] * half;
        float c = cos_table[trow + i], s = sign * sin_table[trow + i];
        T *x0 = x + th * head_dim;
        float a = ft_ld(x0, i), b = ft_ld(x0, i + half);
        ft_st(x0, i, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
        ft_st(x0, i + half, __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
    }
}

extern "C" cudaError_t ft_cuda_launch_rope(ft_dtype dt, void *x, const float *cos_table,
                                           const float *sin_table, const int32_t *pos,
                                           int tokens, int n_heads, int head_dim, int inverse,
                                           cudaStream_t st)
{
    if (tokens <= 0 || n_heads <= 0 || head_dim < 2)
        return cudaSuccess;
    size_t pairs = (size_t)tokens * (size_t)n_heads * (size_t)(head_dim / 2);
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(rope_kernel<T>, ft_cuda_grid_for(pairs, ROPE_THREADS), ROPE_THREADS,
                              0, st)((T *)x, cos_table, sin_table, pos, pairs, n_heads, head_dim,
                                     inverse ? -1.0f : 1.0f));
    return cudaGetLastError();
}
