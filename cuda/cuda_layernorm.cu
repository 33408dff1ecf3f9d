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
 * Where the row length is a multiple of 8 and every buffer 16-byte aligned (vec), a
 * thread takes 8 consecutive values at a time (16-byte accesses, as in cuda_rmsnorm.cu),
 * and the backward's first pass is the dx kernel itself (layernorm_bwd_fused_kernel,
 * rows up to 8192 wide): a block walks NORM_FUSED_ROWS rows with each thread owning the
 * same columns in every row, keeping their w and dw, db sums in registers, so dy and x
 * are read once and one launch goes. The choice depends on shapes and pointers only, so
 * a run is reproducible (the paths sum in different orders: their bits differ).
 * Activations, w and b are fp32 or bf16 (one template), statistics fp32; dw and db are
 * fp32 accumulators or bf16 gradients, each element rounded once. */
#include "cuda_norm_rows.cuh"

#include <math.h>

#define LN_ROWS_PER_CHUNK 128
#define LN_DW_X 32
#define LN_DW_Y 8

/* What a thread of the forward takes at j: 8 values (vec) or 1, into v. */
template <typename T>
__device__ __forceinline__ void ln_load(const T *xr, int j, int vec, float v[FT_VEC])
{
    if (vec)
        ft_ld8(xr, j, v);
    else
        v[0] = ft_ld(xr, j);
}

/* vec: the 8-wide path (thread t takes values 8 t .. 8 t + 7 of every 8 blockDim.x) */
template <typename T>
__global__ void layernorm_fwd_kernel(T *__restrict__ y, float *__restrict__ mean,
                                     float *__restrict__ rstd, const T *__restrict__ x,
                                     const T *__restrict__ w, const T *__restrict__ b, int dim,
                                     float eps, int vec)
{
    __shared__ float red[32];
    size_t r = blockIdx.x;
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    const int first = vec ? threadIdx.x * FT_VEC : threadIdx.x;
    const int step = vec ? blockDim.x * FT_VEC : blockDim.x;
    const int width = vec ? FT_VEC : 1;
    float s = 0.0f;
    for (int j = first; j < dim; j += step) {
        float v[FT_VEC];
        ln_load(xr, j, vec, v);
        for (int e = 0; e < width; e++)
            s += v[e];
    }
    float mu = ft_block_sum(s, red) / (float)dim;
    float ss = 0.0f;
    for (int j = first; j < dim; j += step) {
        float v[FT_VEC];
        ln_load(xr, j, vec, v);
        for (int e = 0; e < width; e++) {
            float d = v[e] - mu;
            ss = fmaf(d, d, ss);
        }
    }
    float rs = 1.0f / sqrtf(ft_block_sum(ss, red) / (float)dim + eps);
    if (threadIdx.x == 0) {
        mean[r] = mu;
        rstd[r] = rs;
    }
    if (vec) {
        for (int j = first; j < dim; j += step) {
            float v[FT_VEC], g[FT_VEC], c[FT_VEC];
            ft_ld8(xr, j, v);
            ft_ld8(w, j, g);
            ft_ld8(b, j, c);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                v[e] = (v[e] - mu) * rs * g[e] + c[e];
            ft_st8(yr, j, v);
        }
    } else {
        for (int j = first; j < dim; j += step)
            ft_st(yr, j, (ft_ld(xr, j) - mu) * rs * ft_ld(w, j) + ft_ld(b, j));
    }
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

/* dx = base + d/dx for rows blockIdx.x * NORM_FUSED_ROWS onwards, and the dw, db sums of
 * those rows into partial_w/partial_b[blockIdx.x][col] (8-wide path, G groups a thread:
 * thread t owns the groups starting at column 8 t + 8 g blockDim.x). With one group a
 * thread the next row's loads are issued before this row's reductions; with two, the
 * registers for that are not there (at most 512 threads: 128 registers a thread). */
template <typename T, int G>
__global__ void __launch_bounds__(512)
    layernorm_bwd_fused_kernel(T *dx, const T *base, float *__restrict__ partial_w,
                               float *__restrict__ partial_b, const T *__restrict__ dy,
                               const T *__restrict__ x, const T *__restrict__ w,
                               const float *__restrict__ mean, const float *__restrict__ rstd,
                               int rows, int dim)
{
    constexpr bool prefetch = G == 1;
    __shared__ float red[32];
    float wv[G][FT_VEC], accw[G][FT_VEC] = {}, accb[G][FT_VEC] = {}, d[G][FT_VEC] = {},
                         v[G][FT_VEC] = {};
    bool mine[G];
    norm_groups_start<T, G>(w, dim, mine, wv);
    const int r0 = blockIdx.x * NORM_FUSED_ROWS;
    const int r1 = min(r0 + NORM_FUSED_ROWS, rows);
    for (int r = r0; r < r1; r++) {
        const size_t row = (size_t)r * dim;
        const float mu = mean[r], rs = rstd[r];
        if (!prefetch || r == r0)
            norm_load_row<T, G>(d, v, dy, x, row, mine);
        float sg = 0.0f, sgx = 0.0f;
#pragma unroll
        for (int g = 0; g < G; g++)
            if (mine[g])
#pragma unroll
                for (int e = 0; e < FT_VEC; e++) {
                    const float gd = d[g][e] * wv[g][e];
                    sg += gd;
                    sgx = fmaf(gd, (v[g][e] - mu) * rs, sgx);
                }
        float dn[G][FT_VEC], vn[G][FT_VEC]; /* the next row's (prefetch only) */
        if (prefetch && r + 1 < r1)
            norm_load_row<T, G>(dn, vn, dy, x, row + dim, mine);
        const float mean_g = ft_block_sum(sg, red) / (float)dim;
        const float mean_gx = ft_block_sum(sgx, red) / (float)dim;
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (!mine[g])
                continue;
            const int j = norm_group_col(g);
            float o[FT_VEC];
            ft_ld8_or_zero(base, row + j, o);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++) {
                const float xhat = (v[g][e] - mu) * rs, gd = d[g][e] * wv[g][e];
                o[e] = o[e] + rs * (gd - mean_g - xhat * mean_gx);
                accw[g][e] = fmaf(d[g][e], xhat, accw[g][e]);
                accb[g][e] += d[g][e];
            }
            ft_st8(dx, row + j, o);
        }
        if (prefetch && r + 1 < r1)
            norm_take_row<G>(d, v, dn, vn);
    }
    norm_store_partial<G>(partial_w, accw, mine, dim);
    norm_store_partial<G>(partial_b, accb, mine, dim);
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
    const int vec = dim % FT_VEC == 0 && ft_aligned16(y, x, w, b);
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(layernorm_fwd_kernel<T>, rows, norm_threads(dim, vec), 0, st)(
                        (T *)y, mean, rstd, (const T *)x, (const T *)w, (const T *)b, dim, eps,
                        vec));
    return cudaGetLastError();
}

/* dw's partials, then db's: chunks of NORM_FUSED_ROWS rows (the fused path; the other path's
 * 128-row chunks need less) */
extern "C" size_t ft_cuda_layernorm_bwd_scratch_bytes(int rows, int dim)
{
    if (rows <= 0 || dim <= 0)
        return 0;
    size_t chunks = ((size_t)rows + NORM_FUSED_ROWS - 1) / NORM_FUSED_ROWS;
    return 2 * chunks * (size_t)dim * sizeof(float);
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
    cudaError_t e = cudaSuccess;
    const int vec = dim % FT_VEC == 0 && ft_aligned16(dx, dy, x, w, dx_base);
    const int groups = norm_fused_groups(dim, vec);
    if (groups > 0) { /* dx and the dw, db partials in one pass */
        const int blocks = (rows + NORM_FUSED_ROWS - 1) / NORM_FUSED_ROWS;
        float *partial_w = (float *)scratch, *partial_b = partial_w + (size_t)blocks * dim;
        FT_WITH_STORAGE(dt, T, {
            void (*kernel)(T *, const T *, float *, float *, const T *, const T *, const T *,
                           const float *, const float *, int, int) =
                groups == 1 ? layernorm_bwd_fused_kernel<T, 1> : layernorm_bwd_fused_kernel<T, 2>;
            FT_LAUNCH(kernel, blocks, norm_threads(dim, vec), 0, st)(
                (T *)dx, (const T *)dx_base, partial_w, partial_b, (const T *)dy, (const T *)x,
                (const T *)w, mean, rstd, rows, dim);
        });
        e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
        FT_LAUNCH(layernorm_dwdb_reduce_kernel, (dim + 255) / 256, 256, 0, st)(
            dw, db, gt == FT_DTYPE_BF16 ? 1 : 0, partial_w, partial_b, blocks, dim);
        return cudaGetLastError();
    }
    int chunks = (rows + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
    float *partial_w = (float *)scratch, *partial_b = partial_w + (size_t)chunks * dim;
    dim3 grid((unsigned)((dim + LN_DW_X - 1) / LN_DW_X), (unsigned)chunks);
    FT_WITH_STORAGE(dt, T, {
        FT_LAUNCH(layernorm_dx_kernel<T>, rows, norm_threads(dim, 0), 0, st)(
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
