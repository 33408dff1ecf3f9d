/* Linear-layer biases (Qwen2's q/k/v projections) on CUDA.
 *   bias_add:  y[r, c] += b[c]                 one thread per element (grid-stride)
 *   bias_grad: db[c]  += sum_r dy[r, c]        one thread per column, rows in order
 * The gradient's per-column loop is the CPU backend's summation order exactly, so
 * the two backends agree to the last bit on it (same fp32 adds in the same order);
 * consecutive threads read consecutive columns of a row, so loads are coalesced. */
#include "cuda_common.cuh"

#define BIAS_THREADS 256

__global__ void bias_add_kernel(float *__restrict__ y, const float *__restrict__ b, size_t n,
                                int dim)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] += b[i % (size_t)dim];
}

__global__ void bias_grad_kernel(float *__restrict__ db, const float *__restrict__ dy, int rows,
                                 int dim)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int r = 0; r < rows; r++)
            acc += dy[(size_t)r * dim + c];
        db[c] += acc;
    }
}

extern "C" cudaError_t ft_cuda_launch_bias_add(float *y, const float *b, int rows, int dim,
                                               cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    size_t n = (size_t)rows * (size_t)dim;
    FT_LAUNCH(bias_add_kernel, ft_cuda_grid_for(n, BIAS_THREADS), BIAS_THREADS, 0, st)(y, b, n,
                                                                                      dim);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_bias_grad(float *db, const float *dy, int rows, int dim,
                                                cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    FT_LAUNCH(bias_grad_kernel, ft_cuda_grid_for((size_t)dim, BIAS_THREADS), BIAS_THREADS, 0,
              st)(db, dy, rows, dim);
    return cudaGetLastError();
}
