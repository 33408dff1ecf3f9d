/* Inverted dropout with a recomputed mask (backend.h's dropout, backend/dropout_mask.h):
 * y = keep ? x * scale : 0, overwritten or added to y. One thread per element
 * (grid-stride) over fp32 or bf16 storage; the mask is the shared header's function
 * of (seed, row0 + row, col), and the product and sum are __fmul_rn / __fadd_rn (never
 * contracted into an FMA), so every bit equals the CPU backend's. */
#include "cuda_common.cuh"

#define DROPOUT_THREADS 256

template <typename T>
__global__ void dropout_kernel(T *y, const T *x, size_t rows, size_t cols, ft_dropout_mask m,
                               bool accumulate)
{
    const size_t n = rows * cols, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const size_t i = e / cols, j = e % cols;
        const uint64_t key = ft_dropout_row_key(&m, (uint64_t)i);
        const float kept = ft_dropout_keep(&m, key, (uint64_t)j) ? __fmul_rn(ft_ld(x, e), m.scale)
                                                                 : 0.0f;
        ft_st(y, e, accumulate ? __fadd_rn(ft_ld(y, e), kept) : kept);
    }
}

extern "C" cudaError_t ft_cuda_launch_dropout(ft_dtype dt, void *y, const void *x, int rows,
                                              int cols, ft_dropout_mask m, bool accumulate,
                                              cudaStream_t st)
{
    const size_t n = (size_t)rows * (size_t)cols;
    if (n == 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(dropout_kernel<T>, ft_cuda_grid_for(n, DROPOUT_THREADS),
                              DROPOUT_THREADS, 0, st)((T *)y, (const T *)x, (size_t)rows,
                                                      (size_t)cols, m, accumulate));
    return cudaGetLastError();
}
