/* Cross-entropy fused with its gradient, one row of logits at a time.
 * With z the row's logits, t the target and w the row weight:
 *   lse      = m + log(sum_j exp(z_j - m)),  m = max_j z_j  (stable logsumexp)
 *   loss     = w * (lse - z_t)             = w * ((m - z_t) + log sum)
 *   dlogit_j = w * grad_scale * (exp(z_j - lse) - [j == t])
 *            = w * grad_scale * (exp((z_j - m) - log sum) - [j == t])
 * The gradient goes to dlogits as fp32 (in place when it is the logits) or as bf16,
 * each element computed in fp32 as for fp32 and rounded once. Rows with w == 0 get zero
 * loss and zero gradient, and their target is never read (it may be a padding id).
 * weight == NULL is taken as w = 1 for every row. Targets must lie in [0, vocab).
 * bf16 logits (the bf16 recipe's head) are widened a row at a time into a buffer of the
 * thread's own, exactly, so the arithmetic and every result bit are those of the fp32
 * op on the widened logits; the row is read from that buffer only, so the gradient may
 * overwrite the logits (in place). */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"
#include "util/bf16.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Row r of the logits as fp32: the row itself, or its widening into buf (bf16). */
static const float *logits_row(const void *logits, ft_dtype lt, size_t r, int vocab, float *buf)
{
    if (lt == FT_DTYPE_F32)
        return (const float *)logits + r * (size_t)vocab;
    const uint16_t *h = (const uint16_t *)logits + r * (size_t)vocab;
#pragma omp simd
    for (int j = 0; j < vocab; j++)
        buf[j] = ft_bf16_to_f32(h[j]);
    return buf;
}

/* One row: z its fp32 logits, g its dlogits (stored as dt, possibly over the logits). */
static void ce_row(const float *z, void *g, ft_dtype dt, float *loss, float w,
                   const int32_t *target, int vocab, float grad_scale)
{
    if (w == 0.0f) {
        memset(g, 0, (size_t)vocab * ft_dtype_size(dt));
        *loss = 0.0f;
        return;
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
    const int t = *target;
    const float zt = z[t]; /* before an in-place gradient overwrites it */
    *loss = w * (float)((double)(m - zt) + log_sum);
    float coef = w * grad_scale;
    float log_sum_f = (float)log_sum;
    const float gt = coef * ft_cpu_expf((zt - m) - log_sum_f) - coef;
    if (dt == FT_DTYPE_BF16) {
        uint16_t *g16 = g;
#pragma omp simd
        for (int j = 0; j < vocab; j++)
            g16[j] = ft_f32_to_bf16(coef * ft_cpu_expf((z[j] - m) - log_sum_f));
        g16[t] = ft_f32_to_bf16(gt);
    } else {
        float *g32 = g;
#pragma omp simd
        for (int j = 0; j < vocab; j++)
            g32[j] = coef * ft_cpu_expf((z[j] - m) - log_sum_f);
        g32[t] = gt;
    }
}

void ft_cpu_cross_entropy(ft_backend *be, const void *logits, ft_dtype lt, void *dlogits,
                          ft_dtype dt, float *row_loss, const int32_t *targets,
                          const float *weight, int rows, int vocab, float grad_scale)
{
    (void)be;
    const size_t work = (size_t)rows * (size_t)vocab, gsize = ft_dtype_size(dt);
#pragma omp parallel if (work >= FT_CPU_PAR_MIN && rows > 1)
    {
        float *buf = NULL; /* this thread's widened row (bf16 logits) */
        if (lt == FT_DTYPE_BF16 && !(buf = malloc((size_t)vocab * sizeof(float)))) {
            fprintf(stderr, "ftmpi: CPU backend: cross_entropy: out of host memory widening "
                            "a row of %d bf16 logits\n", vocab);
            abort(); /* the vtable has no error path (as cpu_widen.c) */
        }
#pragma omp for schedule(dynamic, 1)
        for (int r = 0; r < rows; r++)
            ce_row(logits_row(logits, lt, (size_t)r, vocab, buf),
                   (char *)dlogits + (size_t)r * vocab * gsize, dt, row_loss + r,
                   weight ? weight[r] : 1.0f, targets + r, vocab, grad_scale);
        free(buf);
    }
}
