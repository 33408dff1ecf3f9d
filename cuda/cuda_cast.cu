/* fp32 <-> bf16 (bf16 = upper 16 bits of an fp32, stored as raw uint16), element-wise
 * with ft_bf16_from_f32 / ft_f32_from_bf16 (cuda_common.cuh: round to nearest even, NaN
 * kept; up-cast exact). Pure integer work: bit-identical to the CPU backend. */
#include "cuda_common.cuh"

#define CAST_THREADS 256

__global__ void cast_f32_to_bf16_kernel(uint16_t *__restrict__ dst, const float *__restrict__ src,
                                        size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = ft_bf16_from_f32(src[i]);
}

__global__ void cast_bf16_to_f32_kernel(float *__restrict__ dst, const uint16_t *__restrict__ src,
                                        size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = ft_f32_from_bf16(src[i]);
}

extern "C" cudaError_t ft_cuda_launch_f32_to_bf16(uint16_t *dst, const float *src, size_t n,
                                                  cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(cast_f32_to_bf16_kernel, ft_cuda_grid_for(n, CAST_THREADS), CAST_THREADS, 0, st)
    (dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_bf16_to_f32(float *dst, const uint16_t *src, size_t n,
                                                  cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(cast_bf16_to_f32_kernel, ft_cuda_grid_for(n, CAST_THREADS), CAST_THREADS, 0, st)
    (dst, src, n);
    return cudaGetLastError();
}
