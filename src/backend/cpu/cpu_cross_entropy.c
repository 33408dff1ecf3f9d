/* Cross-entropy fused with its gradient, one row of logits at a time.
 * With z the row's logits, t the target and w the row weight:
 *   lse      = m + log(sum_j exp(z_j - m)),  m = max_j z_j  (stable logsumexp)
 *   loss     = w * (lse - z_t)             = w * ((m - z_t) + log sum)
 *   dlogit_j = w * grad_scale * (exp(z_j - lse) - [j == t])
 *            = w * grad_scale * (exp((z_j - m) - log sum) - [j == t])
 * The gradient goes to dlogits as fp32 (in place when it is the logits) or as bf16,
 * each element computed in fp32 as for fp32 and rounded once. Rows with w == 0 get zero
 * loss and zero gradient, and their target is never read (it may be a padding id).
 * weight == NULL is taken as w = 1 for every row. Targets must lie in [0, vocab). */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"
#include "util/bf16.h"

#include <math.h>
#include <string.h>

void ft_cpu_cross_entropy(ft_backend *be, const float *logits, void *dlogits, ft_dtype dt,
                          float *row_loss, const int32_t *targets, const float *weight, int rows,
                          int vocab, float grad_scale)
{
    const bool bf16 = dt == FT_DTYPE_BF16;
    size_t work = (size_t)rows * (size_t)vocab;
#pragma omp parallel for schedule(dynamic, 1) if (work >= FT_CPU_PAR_MIN && rows > 1)
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * vocab;
        float *g32 = bf16 ? NULL : (float *)dlogits + (size_t)r * vocab;
        uint16_t *g16 = bf16 ? (uint16_t *)dlogits + (size_t)r * vocab : NULL;
        float w = weight ? weight[r] : 1.0f;
        if (w == 0.0f) {
            memset(bf16 ? (void *)g16 : (void *)g32, 0, (size_t)vocab * ft_dtype_size(dt));
            row_loss[r] = 0.0f;
            continue;
        }
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int j = 0; j < vocab; j++)
            m = z[j] > m ? z[j] : m;
        /* The sum runs over up to ~10^5 terms: accumulate it in double. */
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < vocab; j++)
            sum += (double)ft_cpu_expf(z[j] - m);
        /* lse = m + log_sum is never formed in fp32: with logits ~1e4 its
         * rounding alone (~1e-3) would swamp the loss and the probabilities.
         * z_j - m is exact for nearby values, and log_sum is small. */
        double log_sum = log(sum);
        int t = targets[r];
        const float zt = z[t]; /* before an in-place gradient overwrites it */
        row_loss[r] = w * (float)((double)(m - zt) + log_sum);
        float coef = w * grad_scale;
        float log_sum_f = (float)log_sum;
        const float gt = coef * ft_cpu_expf((zt - m) - log_sum_f) - coef;
        if (bf16) {
#pragma omp simd
            for (int j = 0; j < vocab; j++)
                g16[j] = ft_f32_to_bf16(coef * ft_cpu_expf((z[j] - m) - log_sum_f));
            g16[t] = ft_f32_to_bf16(gt);
        } else {
#pragma omp simd
            for (int j = 0; j < vocab; j++)
                g32[j] = coef * ft_cpu_expf((z[j] - m) - log_sum_f);
            g32[t] = gt;
        }
    }
}
