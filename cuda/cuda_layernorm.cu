/* LayerNorm with bias (GPT-NeoX, GPT-J), per row of dim values:
 *   mean = sum(x)/dim,  var = sum((x - mean)^2)/dim  (biased, as torch.nn.LayerNorm),
 *   rstd = 1/sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * w + b.
 * The variance is a second pass around the mean (the row is re-read; it is in L1/L2),
 * never E[x^2] - mean^2, which cancels when |mean| >> std.
 *
 * Backward, for one row with g = dy * w:
 *   dx_j += rstd * (g_j - mean_k(g_k) - xhat_j * mean_k(g_k xhat_k))
 *   dw_j += sum over rows of dy_j * xhat_j,   db_j += sum over rows of dy_j
 *
 * Forward and dx: one block per row; the row's sums are block reductions of a fixed
 * shape, hence reproducible. dw and db are sums over rows, computed without atomics
 * in two deterministic passes, as in cuda_rmsnorm.cu:
 *  1. layernorm_dwdb_partial_kernel: grid (column strips of 32, row chunks of
 *     LN_ROWS_PER_CHUNK); thread (x, y) of a 32 x 8 block walks rows y, y+8, ... of
 *     its chunk for column x, then the 8 partials are added in y order through shared
 *     memory; the chunk's sums go to partial_w[chunk][col] and partial_b[chunk][col].
 *  2. layernorm_dwdb_reduce_kernel: dw[col], db[col] += the chunks' sums in chunk order.
 * The chunking depends on rows and dim only, so every run adds in the same order.
 * Activations, w and b are fp32 or bf16 (one template), statistics fp32; dw and db are
 * fp32 accumulators or bf16 gradients, each element rounded once. */
#include "cuda_common.cuh"

#include <math.h>

#define LN_ROWS_PER_CHUNK 128
#define LN_DW_X 32
#define LN_DW_Y 8

static int ln_threads(int dim)
{
    if (dim >= 2048)
        return 512;
    if (dim >= 512)
        return 256;
    return 128;
}

template <typename T>
__global__ void layernorm_fwd_kernel(T *__restrict__ y, float *__restrict__ mean,
                                     float *__restrict__ rstd, const T *__restrict__ x,
                                     const T *__restrict__ w, const T *__restrict__ b, int dim,
                                     float eps)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    float s = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        s += ft_ld(xr, j);
    float mu = ft_block_sum(s, red) / (float)dim;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float d = ft_ld(xr, j) - mu;
        ss = fmaf(d, d, ss);
    }
    float rs = 1.0f / sqrtf(ft_block_sum(ss, red) / (float)dim + eps);
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        ft_st(yr, j, (ft_ld(xr, j) - mu) * rs * ft_ld(w, j) + ft_ld(b, j));
}

/* dx = base + d/dx per row; base may be dx itself or NULL (as in rmsnorm_dx_kernel) */
template <typename T>
__global__ void layernorm_dx_kernel(T *dx, const T *base, const T *__restrict__ dy,
                                    const T *__restrict__ x, const T *__restrict__ w,
                                    const float *__restrict__ mean,
                                    const float *__restrict__ rstd, int dim)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const T *xr = x + r * dim, *dyr = dy + r * dim;
    T *dxr = dx + r * dim;
    const T *br = base ? base + r * dim : NULL;
    float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float g = ft_ld(dyr, j) * ft_ld(w, j);
        sg += g;
        sgx = fmaf(g, (ft_ld(xr, j) - mu) * rs, sgx);
    }
    float mean_g = ft_block_sum(sg, red) / (float)dim;
    float mean_gx = ft_block_sum(sgx, red) / (float)dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float xhat = (ft_ld(xr, j) - mu) * rs;
        float g = ft_ld(dyr, j) * ft_ld(w, j);
        ft_st(dxr, j, (br ? ft_ld(br, j) : 0.0f) + rs * (g - mean_g - xhat * mean_gx));
    }
}

template <typename T>
__global__ void layernorm_dwdb_partial_kernel(float *__restrict__ partial_w,
                                              float *__restrict__ partial_b,
                                              const T *__restrict__ dy, const T *__restrict__ x,
                                              const float *__restrict__ mean,
                                              const float *__restrict__ rstd, int rows, int dim)
{
    __shared__ float red_w[LN_DW_Y][LN_DW_X], red_b[LN_DW_Y][LN_DW_X];
    int col = blockIdx.x * LN_DW_X + threadIdx.x;
    int chunk = blockIdx.y;
    int r0 = chunk * LN_ROWS_PER_CHUNK, r1 = min(r0 + LN_ROWS_PER_CHUNK, rows);
    float acc_w = 0.0f, acc_b = 0.0f;
    if (col < dim)
        for (int r = r0 + threadIdx.y; r < r1; r += LN_DW_Y) {
            float d = ft_ld(dy, (size_t)r * dim + col);
            acc_w = fmaf(d, (ft_ld(x, (size_t)r * dim + col) - mean[r]) * rstd[r], acc_w);
            acc_b += d;
        }
    red_w[threadIdx.y][threadIdx.x] = acc_w;
    red_b[threadIdx.y][threadIdx.x] = acc_b;
    __syncthreads();
    if (threadIdx.y == 0 && col < dim) {
        float sw = red_w[0][threadIdx.x], sb = red_b[0][threadIdx.x];
#pragma unroll
        for (int k = 1; k < LN_DW_Y; k++) {
            sw += red_w[k][threadIdx.x];
            sb += red_b[k][threadIdx.x];
        }
        partial_w[(size_t)chunk * dim + col] = sw;
        partial_b[(size_t)chunk * dim + col] = sb;
    }
}

/* dw, db (fp32, or bf16 when g_bf16) += the column sums of the partials, in chunk order */
__global__ void layernorm_dwdb_reduce_kernel(void *__restrict__ dw, void *__restrict__ db,
                                             int g_bf16, const float *__restrict__ partial_w,
                                             const float *__restrict__ partial_b, int chunks,
                                             int dim)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= dim)
        return;
    float sw = 0.0f, sb = 0.0f;
    for (int c = 0; c < chunks; c++) {
        sw += partial_w[(size_t)c * dim + col];
        sb += partial_b[(size_t)c * dim + col];
    }
    ft_grad_add(dw, g_bf16, (size_t)col, sw);
    ft_grad_add(db, g_bf16, (size_t)col, sb);
}

extern "C" cudaError_t ft_cuda_launch_layernorm_fwd(ft_dtype dt, void *y, float *mean,
                                                    float *rstd, const void *x, const void *w,
                                                    const void *b, int rows, int dim, float eps,
                                                    cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(layernorm_fwd_kernel<T>, rows, ln_threads(dim), 0, st)(
                        (T *)y, mean, rstd, (const T *)x, (const T *)w, (const T *)b, dim, eps));
    return cudaGetLastError();
}

extern "C" size_t ft_cuda_layernorm_bwd_scratch_bytes(int rows, int dim)
{
    if (rows <= 0 || dim <= 0)
        return 0;
    size_t chunks = ((size_t)rows + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
    return 2 * chunks * (size_t)dim * sizeof(float); /* dw's partials, then db's */
}

extern "C" cudaError_t ft_cuda_launch_layernorm_bwd(ft_dtype dt, ft_dtype gt, void *dx,
                                                    const void *dx_base, void *dw, void *db,
                                                    const void *dy, const void *x,
                                                    const void *w, const float *mean,
                                                    const float *rstd, int rows, int dim,
                                                    void *scratch, cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    int chunks = (rows + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
    float *partial_w = (float *)scratch, *partial_b = partial_w + (size_t)chunks * dim;
    dim3 grid((unsigned)((dim + LN_DW_X - 1) / LN_DW_X), (unsigned)chunks);
    cudaError_t e = cudaSuccess;
    FT_WITH_STORAGE(dt, T, {
        FT_LAUNCH(layernorm_dx_kernel<T>, rows, ln_threads(dim), 0, st)(
            (T *)dx, (const T *)dx_base, (const T *)dy, (const T *)x, (const T *)w, mean, rstd,
            dim);
        e = cudaGetLastError();
        if (e == cudaSuccess) {
            FT_LAUNCH(layernorm_dwdb_partial_kernel<T>, grid, dim3(LN_DW_X, LN_DW_Y), 0, st)(
                partial_w, partial_b, (const T *)dy, (const T *)x, mean, rstd, rows, dim);
            e = cudaGetLastError();
        }
    });
    if (e != cudaSuccess)
        return e;
    FT_LAUNCH(layernorm_dwdb_reduce_kernel, (dim + 255) / 256, 256, 0, st)(
        dw, db, gt == FT_DTYPE_BF16 ? 1 : 0, partial_w, partial_b, chunks, dim);
    return cudaGetLastError();
}
