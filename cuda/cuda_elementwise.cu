/* Element-wise vector ops of the dense-algebra family: y += x, x *= s, and the
 * beta-scaling matmul needs when its inner dimension is empty.
 *
 * Memory-bound: one grid-stride loop, coalesced scalar accesses. Each element is
 * computed by exactly one thread with one rounding, so the results are
 * bit-identical to the CPU backend's (the CPU compiles these loops without
 * contraction, and there is nothing to contract here). */
#include "cuda_common.cuh"

#define EW_THREADS 256

__global__ void ew_add_kernel(float *__restrict__ y, const float *__restrict__ x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += x[i];
}

__global__ void ew_scale_kernel(float *__restrict__ x, float s, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] *= s;
}

/* beta == 0 writes exact zeros without reading x, so stale NaN/inf cannot leak
 * (BLAS semantics for beta == 0). */
__global__ void ew_beta_scale_kernel(float *__restrict__ x, float beta, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = beta == 0.0f ? 0.0f : beta * x[i];
}

__global__ void ew_beta_scale_bf16_kernel(uint16_t *__restrict__ x, float beta, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = beta == 0.0f ? (uint16_t)0 : ft_bf16_from_f32(beta * ft_f32_from_bf16(x[i]));
}

extern "C" cudaError_t ft_cuda_launch_add(float *y, const float *x, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(ew_add_kernel, ft_cuda_grid_for(n, EW_THREADS), EW_THREADS, 0, st)(y, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_scale(float *x, float s, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(ew_scale_kernel, ft_cuda_grid_for(n, EW_THREADS), EW_THREADS, 0, st)(x, s, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_beta_scale(void *x, ft_dtype dt, float beta, size_t n,
                                                 cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    if (dt == FT_DTYPE_BF16)
        FT_LAUNCH(ew_beta_scale_bf16_kernel, ft_cuda_grid_for(n, EW_THREADS), EW_THREADS, 0,
                  st)((uint16_t *)x, beta, n);
    else
        FT_LAUNCH(ew_beta_scale_kernel, ft_cuda_grid_for(n, EW_THREADS), EW_THREADS, 0,
                  st)((float *)x, beta, n);
    return cudaGetLastError();
}
