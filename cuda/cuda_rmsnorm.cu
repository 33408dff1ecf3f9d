/* RMSNorm (Llama): y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps), per row.
 *
 * Backward, for one row with c = sum_k dy_k w_k x_k:
 *   dx_j += rstd * w_j dy_j - x_j * rstd^3 * c / dim
 *   dw_j += sum over rows of dy_j * x_j * rstd
 *
 * Forward and dx: one block per row (the row's reduction is a block reduction
 * with a fixed shape, hence reproducible). Where the row length is a multiple of 8 and
 * every buffer 16-byte aligned, a thread takes 8 consecutive values at a time (16-byte
 * accesses, ft_ld8/ft_st8; vec = 1) with dim / 8 threads up to 512, else one value at a
 * time; the choice depends on the shapes and pointers only, so a run is reproducible.
 * dw is a sum over rows. Instead of float atomics (whose order varies run to
 * run) it is computed in two deterministic passes:
 *  1. rmsnorm_dw_partial_kernel: grid (column strips of 32, row chunks of
 *     RMS_ROWS_PER_CHUNK). Thread (x, y) of a 32 x 8 block walks the rows
 *     y, y+8, ... of its chunk for column x of its strip (coalesced 128-byte row
 *     segments), then the 8 partial sums are added in y order through shared
 *     memory; the chunk's sum goes to partial[chunk][col].
 *  2. rmsnorm_dw_reduce_kernel: dw[col] += sum over chunks in chunk order.
 * The chunking depends on rows and dim only, so every run adds in the same
 * order. On the 8-wide path (where at most NORM_FUSED_GROUPS 8-value groups fall to a
 * thread: rows up to 8192 wide) the first pass is the dx kernel itself
 * (rmsnorm_bwd_fused_kernel): a block walks NORM_FUSED_ROWS rows, each thread owning the
 * same columns in every row, so it keeps their w and dw sums in registers and writes
 * its block's partial at the end. That saves the second read of dy and x (32 MiB a norm at
 * 4096 x 2048 bf16) and a launch; dx is bitwise the one-row kernel's (same threads, same
 * order), dw is summed over blocks of NORM_FUSED_ROWS rows instead of 128-row chunks.
 * Activations and w are fp32 or bf16 (one template), statistics fp32; dw is an
 * fp32 accumulator or a bf16 gradient, each element rounded once. */
#include "cuda_norm_rows.cuh"

#include <math.h>

#define RMS_ROWS_PER_CHUNK 128
#define RMS_DW_X 32
#define RMS_DW_Y 8

template <typename T>
__global__ void rmsnorm_fwd_kernel(T *__restrict__ y, float *__restrict__ rstd,
                                   const T *__restrict__ x, const T *__restrict__ w, int dim,
                                   float eps, int vec)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    float ss = 0.0f;
    if (vec) {
        for (int j = threadIdx.x * FT_VEC; j < dim; j += blockDim.x * FT_VEC) {
            float v[FT_VEC];
            ft_ld8(xr, j, v);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                ss = fmaf(v[e], v[e], ss);
        }
    } else {
        for (int j = threadIdx.x; j < dim; j += blockDim.x) {
            float v = ft_ld(xr, j);
            ss = fmaf(v, v, ss);
        }
    }
    ss = ft_block_sum(ss, red);
    float rs = 1.0f / sqrtf(ss / (float)dim + eps);
    if (threadIdx.x == 0)
        rstd[r] = rs;
    if (vec) {
        for (int j = threadIdx.x * FT_VEC; j < dim; j += blockDim.x * FT_VEC) {
            float v[FT_VEC], g[FT_VEC];
            ft_ld8(xr, j, v);
            ft_ld8(w, j, g);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                v[e] = v[e] * rs * g[e];
            ft_st8(yr, j, v);
        }
    } else {
        for (int j = threadIdx.x; j < dim; j += blockDim.x)
            ft_st(yr, j, ft_ld(xr, j) * rs * ft_ld(w, j));
    }
}

/* dx = base + d/dx per row; base may be dx itself (no __restrict__ on the two: each
 * element is read before the same thread writes it) or NULL (0). */
template <typename T>
__global__ void rmsnorm_dx_kernel(T *dx, const T *base, const T *__restrict__ dy,
                                  const T *__restrict__ x, const T *__restrict__ w,
                                  const float *__restrict__ rstd, int dim, int vec)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const T *xr = x + r * dim, *dyr = dy + r * dim;
    const T *br = base ? base + r * dim : NULL;
    T *dxr = dx + r * dim;
    float rs = rstd[r];
    float c = 0.0f;
    if (vec) {
        for (int j = threadIdx.x * FT_VEC; j < dim; j += blockDim.x * FT_VEC) {
            float d[FT_VEC], g[FT_VEC], v[FT_VEC];
            ft_ld8(dyr, j, d);
            ft_ld8(w, j, g);
            ft_ld8(xr, j, v);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                c = fmaf(d[e] * g[e], v[e], c);
        }
    } else {
        for (int j = threadIdx.x; j < dim; j += blockDim.x)
            c = fmaf(ft_ld(dyr, j) * ft_ld(w, j), ft_ld(xr, j), c);
    }
    c = ft_block_sum(c, red);
    float coef = rs * rs * rs * c / (float)dim;
    if (vec) {
        for (int j = threadIdx.x * FT_VEC; j < dim; j += blockDim.x * FT_VEC) {
            float d[FT_VEC], g[FT_VEC], v[FT_VEC], o[FT_VEC];
            ft_ld8(dyr, j, d);
            ft_ld8(w, j, g);
            ft_ld8(xr, j, v);
            ft_ld8_or_zero(br, j, o);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                o[e] = o[e] + (rs * g[e] * d[e] - v[e] * coef);
            ft_st8(dxr, j, o);
        }
    } else {
        for (int j = threadIdx.x; j < dim; j += blockDim.x)
            ft_st(dxr, j,
                  (br ? ft_ld(br, j) : 0.0f) +
                      (rs * ft_ld(w, j) * ft_ld(dyr, j) - ft_ld(xr, j) * coef));
    }
}

/* dx = base + d/dx for rows blockIdx.x * NORM_FUSED_ROWS onwards, and the dw sum of those
 * rows into partial[blockIdx.x][col] (8-wide path, G groups a thread: thread t owns the
 * groups starting at column 8 t + 8 g blockDim.x). Per row the arithmetic and the order
 * of rmsnorm_dx_kernel's 8-wide path. The next row's loads are issued before this row's
 * block reduction, so that their latency overlaps its barriers. At most 512 threads
 * (norm_threads), hence at most 128 registers a thread. */
template <typename T, int G>
__global__ void __launch_bounds__(512)
    rmsnorm_bwd_fused_kernel(T *dx, const T *base, float *__restrict__ partial,
                             const T *__restrict__ dy, const T *__restrict__ x,
                             const T *__restrict__ w, const float *__restrict__ rstd, int rows,
                             int dim)
{
    __shared__ float red[32];
    float wv[G][FT_VEC], acc[G][FT_VEC] = {}, d[G][FT_VEC] = {}, v[G][FT_VEC] = {};
    bool mine[G];
    norm_groups_start<T, G>(w, dim, mine, wv);
    const int r0 = blockIdx.x * NORM_FUSED_ROWS;
    const int r1 = min(r0 + NORM_FUSED_ROWS, rows);
    if (r0 < r1)
        norm_load_row<T, G>(d, v, dy, x, (size_t)r0 * dim, mine);
    for (int r = r0; r < r1; r++) {
        const size_t row = (size_t)r * dim;
        const float rs = rstd[r];
        float c = 0.0f;
#pragma unroll
        for (int g = 0; g < G; g++)
            if (mine[g])
#pragma unroll
                for (int e = 0; e < FT_VEC; e++)
                    c = fmaf(d[g][e] * wv[g][e], v[g][e], c);
        float dn[G][FT_VEC], vn[G][FT_VEC];
        if (r + 1 < r1)
            norm_load_row<T, G>(dn, vn, dy, x, row + dim, mine);
        c = ft_block_sum(c, red);
        const float coef = rs * rs * rs * c / (float)dim;
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (!mine[g])
                continue;
            float o[FT_VEC];
            ft_ld8_or_zero(base, row + norm_group_col(g), o);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++) {
                o[e] = o[e] + (rs * wv[g][e] * d[g][e] - v[g][e] * coef);
                acc[g][e] = fmaf(d[g][e] * v[g][e], rs, acc[g][e]);
            }
            ft_st8(dx, row + norm_group_col(g), o);
        }
        if (r + 1 < r1)
            norm_take_row<G>(d, v, dn, vn);
    }
    norm_store_partial<G>(partial, acc, mine, dim);
}

template <typename T>
__global__ void rmsnorm_dw_partial_kernel(float *__restrict__ partial, const T *__restrict__ dy,
                                          const T *__restrict__ x,
                                          const float *__restrict__ rstd, int rows, int dim)
{
    __shared__ float red[RMS_DW_Y][RMS_DW_X];
    int col = blockIdx.x * RMS_DW_X + threadIdx.x;
    int chunk = blockIdx.y;
    int r0 = chunk * RMS_ROWS_PER_CHUNK, r1 = min(r0 + RMS_ROWS_PER_CHUNK, rows);
    float acc = 0.0f;
    if (col < dim)
        for (int r = r0 + threadIdx.y; r < r1; r += RMS_DW_Y)
            acc = fmaf(ft_ld(dy, (size_t)r * dim + col) * ft_ld(x, (size_t)r * dim + col),
                       rstd[r], acc);
    red[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < dim) {
        float s = red[0][threadIdx.x];
#pragma unroll
        for (int k = 1; k < RMS_DW_Y; k++)
            s += red[k][threadIdx.x];
        partial[(size_t)chunk * dim + col] = s;
    }
}

/* dw (fp32, or bf16 when dw_bf16) += the column sums of the partials, in chunk order */
__global__ void rmsnorm_dw_reduce_kernel(void *__restrict__ dw, int dw_bf16,
                                         const float *__restrict__ partial, int chunks, int dim)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= dim)
        return;
    float s = 0.0f;
    for (int c = 0; c < chunks; c++)
        s += partial[(size_t)c * dim + col];
    ft_grad_add(dw, dw_bf16, (size_t)col, s);
}

extern "C" cudaError_t ft_cuda_launch_rmsnorm_fwd(ft_dtype dt, void *y, float *rstd,
                                                  const void *x, const void *w, int rows, int dim,
                                                  float eps, cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    int vec = dim % FT_VEC == 0 && ft_aligned16(y, x, w);
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(rmsnorm_fwd_kernel<T>, rows, norm_threads(dim, vec), 0, st)(
                        (T *)y, rstd, (const T *)x, (const T *)w, dim, eps, vec));
    return cudaGetLastError();
}

/* The dw partials' rows: fused blocks of NORM_FUSED_ROWS rows, else RMS_ROWS_PER_CHUNK. The
 * scratch is sized for the smaller chunks (the caller does not know the pointers' alignment). */
extern "C" size_t ft_cuda_rmsnorm_bwd_scratch_bytes(int rows, int dim)
{
    if (rows <= 0 || dim <= 0)
        return 0;
    size_t chunks = ((size_t)rows + NORM_FUSED_ROWS - 1) / NORM_FUSED_ROWS;
    return chunks * (size_t)dim * sizeof(float);
}

extern "C" cudaError_t ft_cuda_launch_rmsnorm_bwd(ft_dtype dt, ft_dtype gt, void *dx,
                                                  const void *dx_base, void *dw, const void *dy,
                                                  const void *x, const void *w,
                                                  const float *rstd, int rows, int dim,
                                                  void *scratch, cudaStream_t st)
{
    if (rows <= 0 || dim <= 0)
        return cudaSuccess;
    float *partial = (float *)scratch;
    cudaError_t e = cudaSuccess;
    int vec = dim % FT_VEC == 0 && ft_aligned16(dx, dy, x, w, dx_base);
    const int groups = norm_fused_groups(dim, vec);
    if (groups > 0) { /* dx and the dw partials in one pass */
        const int blocks = (rows + NORM_FUSED_ROWS - 1) / NORM_FUSED_ROWS;
        const int threads = norm_threads(dim, vec);
        FT_WITH_STORAGE(dt, T, {
            void (*kernel)(T *, const T *, float *, const T *, const T *, const T *,
                           const float *, int, int) =
                groups == 1 ? rmsnorm_bwd_fused_kernel<T, 1> : rmsnorm_bwd_fused_kernel<T, 2>;
            FT_LAUNCH(kernel, blocks, threads, 0, st)((T *)dx, (const T *)dx_base, partial,
                                                      (const T *)dy, (const T *)x, (const T *)w,
                                                      rstd, rows, dim);
        });
        e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
        FT_LAUNCH(rmsnorm_dw_reduce_kernel, (dim + 255) / 256, 256, 0, st)(
            dw, gt == FT_DTYPE_BF16 ? 1 : 0, partial, blocks, dim);
        return cudaGetLastError();
    }
    int chunks = (rows + RMS_ROWS_PER_CHUNK - 1) / RMS_ROWS_PER_CHUNK;
    dim3 grid((unsigned)((dim + RMS_DW_X - 1) / RMS_DW_X), (unsigned)chunks);
    FT_WITH_STORAGE(dt, T, {
        FT_LAUNCH(rmsnorm_dx_kernel<T>, rows, norm_threads(dim, vec), 0, st)(
            (T *)dx, (const T *)dx_base, (const T *)dy, (const T *)x, (const T *)w, rstd, dim,
            vec);
        e = cudaGetLastError();
        if (e == cudaSuccess) {
            FT_LAUNCH(rmsnorm_dw_partial_kernel<T>, grid, dim3(RMS_DW_X, RMS_DW_Y), 0, st)(
                partial, (const T *)dy, (const T *)x, rstd, rows, dim);
            e = cudaGetLastError();
        }
    });
    if (e != cudaSuccess)
        return e;
    FT_LAUNCH(rmsnorm_dw_reduce_kernel, (dim + 255) / 256, 256, 0, st)(
        dw, gt == FT_DTYPE_BF16 ? 1 : 0, partial, chunks, dim);
    return cudaGetLastError();
}
