/* LayerNorm with bias (GPT-NeoX, GPT-J), per row of dim values:
 *   mean = sum(x)/dim,  var = sum((x - mean)^2)/dim  (biased, as torch.nn.LayerNorm),
 *   rstd = 1/sqrt(var + eps),  xhat = (x - mean) * rstd,  y = xhat * w + b.
 * The variance is taken around the mean in a second pass over the row (not as
 * E[x^2] - mean^2, which cancels catastrophically when |mean| >> std).
 *
 * Backward, for one row with g = dy * w (the gradient with respect to xhat):
 *   dx_j = rstd * (g_j - mean_k(g_k) - xhat_j * mean_k(g_k xhat_k))
 *   dw_j = sum over rows of dy_j * xhat_j,   db_j = sum over rows of dy_j
 * dx is parallel over rows. dw and db sum over rows, so they are computed column
 * block by column block, each block walking the rows in order: no race, and the
 * same summation order for any number of threads (as in cpu_rmsnorm.c). */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

void ft_cpu_layernorm_fwd(ft_backend *be, float *y, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int rows, int dim, float eps)
{
    (void)be;
    size_t work = (size_t)rows * (size_t)dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < dim; j++)
            s += xr[j];
        float mu = s / (float)dim;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int j = 0; j < dim; j++) {
            float d = xr[j] - mu;
            ss += d * d;
        }
        float rs = 1.0f / sqrtf(ss / (float)dim + eps);
        mean[r] = mu;
        rstd[r] = rs;
#pragma omp simd
        for (int j = 0; j < dim; j++)
            yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    }
}

#define LAYERNORM_DW_BLOCK 64

void ft_cpu_layernorm_bwd(ft_backend *be, float *dx, const float *dx_base, float *dw, float *db,
                          const float *dy, const float *x, const float *w, const float *mean,
                          const float *rstd, int rows, int dim)
{
    (void)be;
    size_t work = (size_t)rows * (size_t)dim;
    int col_blocks = (dim + LAYERNORM_DW_BLOCK - 1) / LAYERNORM_DW_BLOCK;
#pragma omp parallel if (work >= FT_CPU_PAR_MIN)
    {
#pragma omp for schedule(static) nowait
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * dim;
            const float *dyr = dy + (size_t)r * dim;
            float *dxr = dx + (size_t)r * dim;
            const float *br = dx_base ? dx_base + (size_t)r * dim : NULL;
            float mu = mean[r], rs = rstd[r];
            float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
            for (int j = 0; j < dim; j++) {
                float g = dyr[j] * w[j];
                sum_g += g;
                sum_gx += g * ((xr[j] - mu) * rs);
            }
            float mean_g = sum_g / (float)dim, mean_gx = sum_gx / (float)dim;
#pragma omp simd
            for (int j = 0; j < dim; j++) {
                float xhat = (xr[j] - mu) * rs;
                dxr[j] = (br ? br[j] : 0.0f) + rs * (dyr[j] * w[j] - mean_g - xhat * mean_gx);
            }
        }
#pragma omp for schedule(static)
        for (int cb = 0; cb < col_blocks; cb++) {
            int lo = cb * LAYERNORM_DW_BLOCK;
            int hi = lo + LAYERNORM_DW_BLOCK < dim ? lo + LAYERNORM_DW_BLOCK : dim;
            float acc_w[LAYERNORM_DW_BLOCK] = {0}, acc_b[LAYERNORM_DW_BLOCK] = {0};
            for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * dim;
                const float *dyr = dy + (size_t)r * dim;
                float mu = mean[r], rs = rstd[r];
#pragma omp simd
                for (int j = lo; j < hi; j++) {
                    acc_w[j - lo] += dyr[j] * ((xr[j] - mu) * rs);
                    acc_b[j - lo] += dyr[j];
                }
            }
            for (int j = lo; j < hi; j++) {
                dw[j] += acc_w[j - lo];
                db[j] += acc_b[j - lo];
            }
        }
    }
}
