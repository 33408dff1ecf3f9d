/* What the RMSNorm and LayerNorm kernels (cuda_rmsnorm.cu, cuda_layernorm.cu) share: the
 * threads of a row's block, and the fused backward's column groups. In the fused backward
 * a block walks NORM_FUSED_ROWS rows and thread t owns the 8-value groups starting at
 * column 8 (t + g blockDim.x), g < G, the same in every row, so that it keeps their w and
 * its weight-gradient sums in registers; at the end the block's sums go to its row of
 * the partials, which a second kernel adds over the blocks in order. */
#ifndef FT_CUDA_NORM_ROWS_CUH
#define FT_CUDA_NORM_ROWS_CUH

#include "cuda_common.cuh"

#define NORM_FUSED_ROWS 16  /* rows a block of a fused backward walks (its partials' chunk) */
#define NORM_FUSED_GROUPS 2 /* groups a thread of it owns at most: 128 registers at 512 */

/* threads per row: one per 8-value group on the 8-wide path (a multiple of 32, at most
 * 512), else by the row length */
static inline int norm_threads(int dim, int vec)
{
    if (vec) {
        int groups = (dim / FT_VEC + FT_WARP - 1) / FT_WARP * FT_WARP;
        return groups > 512 ? 512 : groups;
    }
    if (dim >= 2048)
        return 512;
    if (dim >= 512)
        return 256;
    return 128;
}

/* Groups a thread of the fused backward owns (0: no fused kernel for this shape). */
static inline int norm_fused_groups(int dim, int vec)
{
    if (!vec)
        return 0;
    const int per_pass = norm_threads(dim, vec) * FT_VEC;
    const int g = (dim + per_pass - 1) / per_pass;
    return g <= NORM_FUSED_GROUPS ? g : 0;
}

/* The first column of this thread's group g. */
__device__ __forceinline__ int norm_group_col(int g)
{
    return (threadIdx.x + g * blockDim.x) * FT_VEC;
}

/* mine[g]: whether group g lies inside the row; wv[g]: w there (zeros outside). */
template <typename T, int G>
__device__ __forceinline__ void norm_groups_start(const T *__restrict__ w, int dim, bool *mine,
                                                  float (*wv)[FT_VEC])
{
#pragma unroll
    for (int g = 0; g < G; g++) {
        mine[g] = norm_group_col(g) < dim;
#pragma unroll
        for (int e = 0; e < FT_VEC; e++)
            wv[g][e] = 0.0f;
        if (mine[g])
            ft_ld8(w, norm_group_col(g), wv[g]);
    }
}

/* One row's dy and x (from element `row` on) for this thread's groups. */
template <typename T, int G>
__device__ __forceinline__ void norm_load_row(float (*d)[FT_VEC], float (*v)[FT_VEC],
                                              const T *__restrict__ dy, const T *__restrict__ x,
                                              size_t row, const bool *mine)
{
#pragma unroll
    for (int g = 0; g < G; g++)
        if (mine[g]) {
            ft_ld8(dy, row + norm_group_col(g), d[g]);
            ft_ld8(x, row + norm_group_col(g), v[g]);
        }
}

/* The prefetched next row (dn, vn) becomes the current one (d, v). */
template <int G>
__device__ __forceinline__ void norm_take_row(float (*d)[FT_VEC], float (*v)[FT_VEC],
                                              const float (*dn)[FT_VEC],
                                              const float (*vn)[FT_VEC])
{
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int e = 0; e < FT_VEC; e++) {
            d[g][e] = dn[g][e];
            v[g][e] = vn[g][e];
        }
}

/* This block's row of the partials: partial[blockIdx.x][cols] = acc, for its groups. */
template <int G>
__device__ __forceinline__ void norm_store_partial(float *__restrict__ partial,
                                                   const float (*acc)[FT_VEC], const bool *mine,
                                                   int dim)
{
#pragma unroll
    for (int g = 0; g < G; g++)
        if (mine[g])
            ft_st8(partial + (size_t)blockIdx.x * dim, norm_group_col(g), acc[g]);
}

#endif
