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
 * and the same arithmetic, so both paths give the same bits. A step's q and k rotate in
 * one launch (ft_cuda_launch_rope_qk: the items of q, then those of k). */
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

/* A launch rotates x0 ([tokens, heads0 * head_dim], its items first) and, for q and k
 * together, x1 (NULL: none); items0 is x0's count of the kernel's items. (Separate pointer
 * arguments, not a struct: the harness checks each pointer argument's accesses.) Item idx
 * of the launch as (tensor, its local item index, its head count). q and k never alias:
 * both pointers are __restrict__ in the kernels. */
template <typename T>
__device__ __forceinline__ T *rope_item(T *x0, T *x1, int heads0, int heads1, size_t items0,
                                        size_t *idx, int *n_heads)
{
    if (*idx < items0) {
        *n_heads = heads0;
        return x0;
    }
    *idx -= items0;
    *n_heads = heads1;
    return x1;
}

template <typename T>
__global__ void rope_kernel(T *__restrict__ x0, T *__restrict__ x1, int heads0, int heads1,
                            size_t items0, const float *__restrict__ cos_table,
                            const float *__restrict__ sin_table, const int32_t *__restrict__ pos,
                            size_t pairs, int head_dim, int rot_dim, int interleaved, float sign)
{
    int half = rot_dim / 2;
    int a_step = interleaved ? 2 : 1, b_off = interleaved ? 1 : half;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t item = (size_t)blockIdx.x * blockDim.x + threadIdx.x; item < pairs;
         item += stride) {
        size_t idx = item;
        int n_heads;
        T *x = rope_item(x0, x1, heads0, heads1, items0, &idx, &n_heads);
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
__global__ void rope_half_split_vec_kernel(T *__restrict__ x0, T *__restrict__ x1, int heads0,
                                           int heads1, size_t items0,
                                           const float *__restrict__ cos_table,
                                           const float *__restrict__ sin_table,
                                           const int32_t *__restrict__ pos, size_t items,
                                           int head_dim, int half, float sign)
{
    int groups = half / FT_VEC;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t item = (size_t)blockIdx.x * blockDim.x + threadIdx.x; item < items;
         item += stride) {
        size_t idx = item;
        int n_heads;
        T *x = rope_item(x0, x1, heads0, heads1, items0, &idx, &n_heads);
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

/* x0 (heads0) and, unless NULL, x1 (heads1) in one launch; the caller checked that both
 * may take the path it asks for. */
static cudaError_t rope_launch(ft_dtype dt, void *x0, int heads0, void *x1, int heads1,
                               const float *cos_table, const float *sin_table, const int32_t *pos,
                               int tokens, ft_rope_shape r, int inverse, int vec, cudaStream_t st)
{
    const int half = r.rot_dim / 2;
    const size_t per_head = vec ? (size_t)(half / FT_VEC) : (size_t)half; /* items */
    const size_t items0 = (size_t)tokens * (size_t)heads0 * per_head;
    const size_t items = items0 + (x1 ? (size_t)tokens * (size_t)heads1 * per_head : 0);
    const float sign = inverse ? -1.0f : 1.0f;
    FT_WITH_STORAGE(dt, T, {
        if (vec)
            FT_LAUNCH(rope_half_split_vec_kernel<T>, ft_cuda_grid_for(items, ROPE_THREADS),
                      ROPE_THREADS, 0, st)((T *)x0, (T *)x1, heads0, heads1, items0, cos_table,
                                           sin_table, pos, items, r.head_dim, half, sign);
        else
            FT_LAUNCH(rope_kernel<T>, ft_cuda_grid_for(items, ROPE_THREADS), ROPE_THREADS, 0,
                      st)((T *)x0, (T *)x1, heads0, heads1, items0, cos_table, sin_table, pos,
                          items, r.head_dim, r.rot_dim, r.interleaved ? 1 : 0, sign);
    });
    return cudaGetLastError();
}

/* Whether x takes the 8-wide path */
static int rope_vec_ok(const void *x, const float *cos_table, const float *sin_table,
                       ft_rope_shape r)
{
    return !r.interleaved && (r.rot_dim / 2) % FT_VEC == 0 && r.head_dim % FT_VEC == 0 &&
           ft_aligned16(x, cos_table, sin_table);
}

extern "C" cudaError_t ft_cuda_launch_rope(ft_dtype dt, void *x, const float *cos_table,
                                           const float *sin_table, const int32_t *pos,
                                           int tokens, int n_heads, ft_rope_shape r, int inverse,
                                           cudaStream_t st)
{
    if (tokens <= 0 || n_heads <= 0 || r.rot_dim < 2)
        return cudaSuccess;
    return rope_launch(dt, x, n_heads, NULL, 0, cos_table, sin_table, pos, tokens, r, inverse,
                       rope_vec_ok(x, cos_table, sin_table, r), st);
}

extern "C" cudaError_t ft_cuda_launch_rope_qk(ft_dtype dt, void *q, int q_heads, void *k,
                                              int k_heads, const float *cos_table,
                                              const float *sin_table, const int32_t *pos,
                                              int tokens, ft_rope_shape r, int inverse,
                                              cudaStream_t st)
{
    if (tokens <= 0 || r.rot_dim < 2)
        return cudaSuccess;
    const int vq = rope_vec_ok(q, cos_table, sin_table, r);
    if (q_heads > 0 && k_heads > 0 && vq == rope_vec_ok(k, cos_table, sin_table, r))
        return rope_launch(dt, q, q_heads, k, k_heads, cos_table, sin_table, pos, tokens, r,
                           inverse, vq, st);
    /* one of them off the 16-byte alignment (or absent): each on its own path */
    cudaError_t e = ft_cuda_launch_rope(dt, q, cos_table, sin_table, pos, tokens, q_heads, r,
                                        inverse, st);
    if (e != cudaSuccess)
        return e;
    return ft_cuda_launch_rope(dt, k, cos_table, sin_table, pos, tokens, k_heads, r, inverse,
                               st);
}
