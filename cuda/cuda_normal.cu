/* Random initial values made on the device (backend.h's normal_fill): each thread
 * computes its values with the host's polynomials (util/rng_normal_math.h) in fp64. A
 * value whose float the polynomials cannot vouch for (about 1 in 5,000) is listed, and
 * the host replaces it with the libm reference's (cuda_normal_fill.c), so the floats are
 * bitwise those of the CPU backend and of any sharding. */
#include "cuda_common.cuh"
#include "util/rng_normal_math.h"

#define NORMAL_FILL_THREADS 256

__global__ void normal_fill_kernel(float *__restrict__ dst, size_t n, uint64_t key,
                                   uint64_t first, double std, unsigned *n_unsure,
                                   uint32_t *unsure, unsigned cap)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double y = ft_rng_normal_fast(key, first + i, std);
        const float f = (float)y;
        const bool sure = ft_rng_normal_is_sure(y, f, std);
        if (!sure) {
            const unsigned slot = atomicAdd(n_unsure, 1u);
            if (slot < cap) /* past cap the host redoes the whole range */
                unsure[slot] = (uint32_t)i;
        }
        /* an unsure value is NaN until the host writes the reference's over it, so a
         * value the host missed cannot pass for a right one */
        dst[i] = sure ? f : __int_as_float(0x7fc00000);
    }
}

__global__ void scatter_f32_kernel(float *__restrict__ dst, const uint32_t *__restrict__ idx,
                                   const float *__restrict__ val, unsigned count)
{
    unsigned stride = gridDim.x * blockDim.x;
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += stride)
        dst[idx[k]] = val[k];
}

extern "C" cudaError_t ft_cuda_launch_normal_fill(float *dst, size_t n, uint64_t key,
                                                  uint64_t first, double std,
                                                  unsigned *n_unsure, uint32_t *unsure,
                                                  unsigned cap, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(normal_fill_kernel, ft_cuda_grid_for(n, NORMAL_FILL_THREADS), NORMAL_FILL_THREADS,
              0, st)
    (dst, n, key, first, std, n_unsure, unsure, cap);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_scatter_f32(float *dst, const uint32_t *idx,
                                                  const float *val, unsigned count,
                                                  cudaStream_t st)
{
    if (count == 0)
        return cudaSuccess;
    FT_LAUNCH(scatter_f32_kernel, ft_cuda_grid_for(count, NORMAL_FILL_THREADS),
              NORMAL_FILL_THREADS, 0, st)
    (dst, idx, val, count);
    return cudaGetLastError();
}
