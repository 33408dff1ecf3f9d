/* Linear-layer biases (Qwen2's q/k/v projections, GPT-NeoX's and GPT-J's layers) on CUDA.
 *   bias_add:  y[r, c] += b[c]                 one thread per element (grid-stride)
 *   bias_grad: db[c]  += sum_r dy[r, c]        one thread per column, rows in order
 * The gradient's per-column loop is the CPU backend's summation order exactly, so
 * the two backends agree to the last bit on it (same fp32 adds in the same order);
 * consecutive threads read consecutive columns of a row, so loads are coalesced.
 * b and dy are fp32 or bf16 (one template); y is stored as its own type Y (fp32 logits
 * take a bf16 bias in GPT-J's lm_head); db is an fp32 or bf16 gradient. */
#include "cuda_common.cuh"

#define BIAS_THREADS 256

template <typename Y, typename T>
__global__ void bias_add_kernel(Y *__restrict__ y, const T *__restrict__ b, size_t n, int dim)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        ft_st(y, i, ft_ld(y, i) + ft_ld(b, i % (size_t)dim));
}

template <typename T>
__global__ void bias_grad_kernel(void *__restrict__ db, int db_bf16, const T *__restrict__ dy,
                                 int rows, int dim)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < dim; c += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int r = 0; r < rows; r++)
            acc += ft_ld(dy, (size_t)r * dim + c);
        ft_grad_add(db, db_bf16, (size_t)c, acc);
    }
}

/* The bias's storage T for an output stored as Y (a template argument list has a
 * comma, which FT_WITH_STORAGE's launch statement cannot carry). */
template <typename Y>
static void launch_bias_add(ft_dtype dt, Y *y, const void *b, size_t n, int dim, cudaStream_t st)
{
    FT_WITH_STORAGE(dt, T, {
        void (*kernel)(Y *, const T *, size_t, int) = bias_add_kernel<Y, T>;
        FT_LAUNCH(kernel, ft_cuda_grid_for(n, BIAS_THREADS), BIAS_THREADS, 0, st)(
            y, (const T *)b, n, dim);
    });
}

extern "C" cudaError_t ft_cuda_launch_bias_add(ft_dtype dt, ft_dtype yt, void *y, const void *b,
                                               int rows, int dim, cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    size_t n = (size_t)rows * (size_t)dim;
    FT_WITH_STORAGE(yt, Y, launch_bias_add(dt, (Y *)y, b, n, dim, st));
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_bias_grad(ft_dtype dt, ft_dtype gt, void *db,
                                                const void *dy, int rows, int dim,
                                                cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(bias_grad_kernel<T>, ft_cuda_grid_for((size_t)dim, BIAS_THREADS),
                              BIAS_THREADS, 0, st)(db, gt == FT_DTYPE_BF16 ? 1 : 0,
                                                   (const T *)dy, rows, dim));
    return cudaGetLastError();
}
