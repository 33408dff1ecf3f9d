/* Cross-entropy fused with its gradient, one row of logits at a time.
 * With z the row's logits, t the target and w the row weight:
 *   lse      = m + log(sum_j exp(z_j - m)),  m = max_j z_j  (stable logsumexp)
 *   loss     = w * (lse - z_t)             = w * ((m - z_t) + log sum)
 *   dlogit_j = w * grad_scale * (exp(z_j - lse) - [j == t])
 *            = w * grad_scale * (exp((z_j - m) - log sum) - [j == t])
 * The gradient overwrites the logits in place. Rows with w == 0 get zero loss
 * and zero gradient, and their target is never read (it may be a padding id).
 * weight == NULL is taken as w = 1 for every row. Targets must lie in [0, vocab). */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <math.h>
#include <string.h>

void ft_cpu_cross_entropy(ft_backend *be, float *logits, float *row_loss, const int32_t *targets,
                          const float *weight, int rows, int vocab, float grad_scale)
{
    size_t work = (size_t)rows * (size_t)vocab;
#pragma omp parallel for schedule(dynamic, 1) if (work >= FT_CPU_PAR_MIN && rows > 1)
    for (int r = 0; r < rows; r++) {
        float *z = logits + (size_t)r * vocab;
        float w = weight ? weight[r] : 1.0f;
        if (w == 0.0f) {
            memset(z, 0, (size_t)vocab * sizeof(float));
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
        row_loss[r] = w * (float)((double)(m - z[t]) + log_sum);
        float coef = w * grad_scale;
        float log_sum_f = (float)log_sum;
#pragma omp simd
        for (int j = 0; j < vocab; j++)
            z[j] = coef * ft_cpu_expf((z[j] - m) - log_sum_f);
        z[t] -= coef;
    }
}
