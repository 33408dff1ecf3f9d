/* fp32 <-> bf16 (bf16 = upper 16 bits of an fp32, stored as raw uint16).
 * Down-cast: round to nearest, ties to even, by adding 0x7FFF plus the lowest
 * kept bit and truncating; a carry out of the mantissa bumps the exponent, so
 * values past the largest bf16 become inf and inf stays inf. NaN is not rounded
 * (the carry could turn it into inf): it keeps sign and high payload and gets
 * the quiet bit, so it stays NaN. Up-cast is exact (shift left).
 * Pure integer work: bit-identical to the CPU backend. */
#include "cuda_common.cuh"

#define CAST_THREADS 256

__device__ __forceinline__ uint16_t cast_bf16_from_f32(float x)
{
    uint32_t u = __float_as_uint(x);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(is_nan ? quiet_nan : rounded);
}

__global__ void cast_f32_to_bf16_kernel(uint16_t *__restrict__ dst, const float *__restrict__ src,
                                        size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = cast_bf16_from_f32(src[i]);
}

__global__ void cast_bf16_to_f32_kernel(float *__restrict__ dst, const uint16_t *__restrict__ src,
                                        size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
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
