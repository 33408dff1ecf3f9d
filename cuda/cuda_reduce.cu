/* sum x^2 in fp64, deterministic, in two passes:
 *  1. SUMSQ_BLOCKS(n) blocks of 256 threads walk the vector with a grid stride;
 *     each thread accumulates in double, the block reduces in a fixed order and
 *     writes one partial.
 *  2. One block adds the partials (fixed order again) and writes the result.
 * The number of blocks depends on n only, so every run adds in the same order
 * (results can differ from the CPU backend's in the last bits: the order is
 * different, both are fp64). */
#include "cuda_common.cuh"

#define SUMSQ_THREADS 256
#define SUMSQ_MAX_BLOCKS 1024
#define SUMSQ_PER_THREAD 16

static unsigned sumsq_blocks(size_t n)
{
    size_t per_block = (size_t)SUMSQ_THREADS * SUMSQ_PER_THREAD;
    size_t b = (n + per_block - 1) / per_block;
    if (b > SUMSQ_MAX_BLOCKS)
        b = SUMSQ_MAX_BLOCKS;
    return b == 0 ? 1u : (unsigned)b;
}

__global__ void sumsq_partial_kernel(double *__restrict__ partial, const float *__restrict__ x,
                                     size_t n)
{
    __shared__ double red[32];
    size_t stride = (size_t)gridDim.x * blockDim.x;
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = (double)x[i];
        s = fma(v, v, s);
    }
    s = ft_block_sum(s, red);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s;
}

__global__ void sumsq_final_kernel(double *__restrict__ result, const double *__restrict__ partial,
                                   unsigned count)
{
    __shared__ double red[32];
    double s = 0.0;
    for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
        s += partial[i];
    s = ft_block_sum(s, red);
    if (threadIdx.x == 0)
        *result = s;
}

extern "C" size_t ft_cuda_sum_squares_scratch_bytes(size_t n)
{
    return (size_t)sumsq_blocks(n) * sizeof(double);
}

extern "C" cudaError_t ft_cuda_launch_sum_squares(double *result_dev, const float *x, size_t n,
                                                  void *scratch, cudaStream_t st)
{
    unsigned blocks = sumsq_blocks(n);
    double *partial = (double *)scratch;
    FT_LAUNCH(sumsq_partial_kernel, blocks, SUMSQ_THREADS, 0, st)(partial, x, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    FT_LAUNCH(sumsq_final_kernel, 1, SUMSQ_THREADS, 0, st)(result_dev, partial, blocks);
    return cudaGetLastError();
}
