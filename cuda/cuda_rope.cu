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
 * angles are fp32 tables. */
#include "cuda_common.cuh"

#define ROPE_THREADS 256

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
        ft_st(xh, ia, __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
        ft_st(xh, ib, __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c)));
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
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(rope_kernel<T>, ft_cuda_grid_for(pairs, ROPE_THREADS), ROPE_THREADS,
                              0, st)((T *)x, cos_table, sin_table, pos, pairs, n_heads,
                                     r.head_dim, r.rot_dim, r.interleaved ? 1 : 0,
                                     inverse ? -1.0f : 1.0f));
    return cudaGetLastError();
}
