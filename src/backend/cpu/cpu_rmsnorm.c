/* RMSNorm (Llama): y = x * rstd * w,  rstd = 1 / sqrt(mean(x^2) + eps), per row.
 *
 * Backward, for one row with c = sum_k dy_k w_k x_k:
 *   dx_j = rstd * w_j dy_j - x_j * rstd^3 * c / dim
 *   dw_j = sum over rows of dy_j * x_j * rstd
 * Rows are independent for dx (parallel over rows); dw sums over rows, so it is
 * computed column-block by column-block, each block walking the rows in order:
 * no race, and the same summation order for any thread count. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

void ft_cpu_rmsnorm_fwd(ft_backend *be, float *y, float *rstd, const float *x, const float *w,
                        int rows, int dim, float eps)
{
    size_t work = (size_t)rows * (size_t)dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int j = 0; j < dim; j++)
            ss += xr[j] * xr[j];
        float rs = 1.0f / sqrtf(ss / (float)dim + eps);
        rstd[r] = rs;
#pragma omp simd
        for (int j = 0; j < dim; j++)
            yr[j] = xr[j] * rs * w[j];
    }
}

#define RMSNORM_DW_BLOCK 64

void ft_cpu_rmsnorm_bwd(ft_backend *be, float *dx, const float *dx_base, float *dw,
                        const float *dy, const float *x, const float *w, const float *rstd,
                        int rows, int dim)
{
    size_t work = (size_t)rows * (size_t)dim;
    int col_blocks = (dim + RMSNORM_DW_BLOCK - 1) / RMSNORM_DW_BLOCK;
#pragma omp parallel if (work >= FT_CPU_PAR_MIN)
    {
#pragma omp for schedule(static) nowait
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * dim;
            const float *dyr = dy + (size_t)r * dim;
            float *dxr = dx + (size_t)r * dim;
            const float *br = dx_base ? dx_base + (size_t)r * dim : NULL;
            float rs = rstd[r];
            float c = 0.0f;
#pragma omp simd reduction(+ : c)
            for (int j = 0; j < dim; j++)
                c += dyr[j] * w[j] * xr[j];
            float coef = rs * rs * rs * c / (float)dim;
#pragma omp simd
            for (int j = 0; j < dim; j++)
                dxr[j] = (br ? br[j] : 0.0f) + (rs * w[j] * dyr[j] - xr[j] * coef);
        }
#pragma omp for schedule(static)
        for (int cb = 0; cb < col_blocks; cb++) {
            int lo = cb * RMSNORM_DW_BLOCK;
            int hi = lo + RMSNORM_DW_BLOCK < dim ? lo + RMSNORM_DW_BLOCK : dim;
            float acc[RMSNORM_DW_BLOCK] = {0};
            for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * dim;
                const float *dyr = dy + (size_t)r * dim;
                float rs = rstd[r];
#pragma omp simd
                for (int j = lo; j < hi; j++)
                    acc[j - lo] += dyr[j] * xr[j] * rs;
            }
            for (int j = lo; j < hi; j++)
                dw[j] += acc[j - lo];
        }
    }
}
