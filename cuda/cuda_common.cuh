/* Device-side helpers shared by the kernel files (C++, nvcc only). */
#ifndef FT_CUDA_COMMON_CUH
#define FT_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_internal.h"

#define FT_WARP 32
#define FT_FULL_MASK 0xffffffffu

/* Every kernel launch goes through FT_LAUNCH(kernel, grid, block, smem_bytes, stream)(args...)
 * and every kernel's dynamic shared memory is declared with FT_DYNAMIC_SMEM(type, name).
 * Under nvcc they are exactly `kernel<<<grid, block, smem, stream>>>(args...)` and
 * `extern __shared__ type name[]` (identical PTX). The CPU execution harness
 * (test/cudaemu, ./configure --with-cuda-emulation) compiles the same sources with the host
 * compiler, which cannot parse `<<<>>>` and gives `extern __shared__` no block-shared
 * meaning; there the macros launch on its fibers and return the block's dynamic shared
 * memory. `kernel` names a kernel or a pointer to one (template instantiations: take a
 * pointer first, the macro cannot hold their commas). */
#ifdef FT_CUDA_EMULATION
#define FT_LAUNCH(kernel, grid, block, smem, stream)                                               \
    cudaemu_launch(kernel, #kernel, grid, block, smem, stream, __FILE__, __LINE__)
#define FT_DYNAMIC_SMEM(type, name) type *name = (type *)cudaemu_dynamic_smem()
#else
#define FT_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define FT_DYNAMIC_SMEM(type, name) extern __shared__ type name[]
#endif

/* Grid size for a grid-stride loop over n items with `threads` per block: enough
 * blocks to fill the device several times over, capped so that the index
 * arithmetic stays cheap (each thread then loops). */
static inline unsigned ft_cuda_grid_for(size_t n, int threads)
{
    size_t blocks = (n + (size_t)threads - 1) / (size_t)threads;
    const size_t cap = 65535u * 8u;
    if (blocks > cap)
        blocks = cap;
    if (blocks == 0)
        blocks = 1;
    return (unsigned)blocks;
}

template <typename T>
__device__ __forceinline__ T ft_warp_sum(T v)
{
#pragma unroll
    for (int off = FT_WARP / 2; off > 0; off >>= 1)
        v += __shfl_xor_sync(FT_FULL_MASK, v, off);
    return v;
}

__device__ __forceinline__ float ft_warp_max(float v)
{
#pragma unroll
    for (int off = FT_WARP / 2; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FT_FULL_MASK, v, off));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread
 * gets the result. `shared` holds 32 T. The order of additions is fixed by the
 * block shape, so results are reproducible. Contains __syncthreads: call from
 * all threads. */
template <typename T>
__device__ __forceinline__ T ft_block_sum(T v, T *shared)
{
    int lane = threadIdx.x % FT_WARP, warp = threadIdx.x / FT_WARP;
    int nwarps = blockDim.x / FT_WARP;
    v = ft_warp_sum(v);
    __syncthreads(); /* `shared` may still be read from a previous call */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    T r = lane < nwarps ? shared[lane] : T(0);
    return ft_warp_sum(r);
}

__device__ __forceinline__ float ft_block_max(float v, float *shared)
{
    int lane = threadIdx.x % FT_WARP, warp = threadIdx.x / FT_WARP;
    int nwarps = blockDim.x / FT_WARP;
    v = ft_warp_max(v);
    __syncthreads();
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? shared[lane] : -INFINITY;
    return ft_warp_max(r);
}

/* fp32 -> bf16 bits, round to nearest even by adding 0x7FFF plus the lowest kept bit and
 * truncating (a carry past the mantissa bumps the exponent: overflow becomes inf, inf stays
 * inf); NaN is not rounded (the carry could make it inf) but keeps sign and high payload
 * with the quiet bit set. Bit-identical to the CPU backend (util/bf16.h). */
__device__ __forceinline__ uint16_t ft_bf16_from_f32(float x)
{
    uint32_t u = __float_as_uint(x);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(is_nan ? quiet_nan : rounded);
}

/* bf16 bits -> fp32: exact. */
__device__ __forceinline__ float ft_f32_from_bf16(uint16_t h)
{
    return __uint_as_float((uint32_t)h << 16);
}

#include "cuda_storage.cuh"

/* sigma(g) = 1 / (1 + e^-g) with the accurate expf (not __expf): results should
 * agree with the CPU backend to a few ulp. */
__device__ __forceinline__ float ft_sigmoid(float g)
{
    return 1.0f / (1.0f + expf(-g));
}

#endif
