/* Optimiser steps over flat fp32 buffers.
 *
 * AdamW follows torch.optim.AdamW (single-tensor path, foreach=False,
 * capturable=False) operation by operation, so that results agree with PyTorch
 * to rounding: the scalar coefficients are formed in double (as Python does) and
 * rounded to fp32 where PyTorch hands them to a float kernel:
 *   p   = p * (1 - lr*wd)                    decoupled weight decay, first
 *   m   = m + (1-b1) * (g - m)               exp_avg.lerp_(g, 1-b1)
 *   v   = v * b2 + ((1-b2) * g) * g          exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
 *   bc1 = 1 - b1^t,  bc2 = 1 - b2^t          (double)
 *   den = sqrt(v) / sqrt(bc2) + eps
 *   p   = p + ((-lr/bc1) * m) / den          param.addcdiv_(m, den, value=-lr/bc1)
 * (PyTorch's vectorised lerp uses a fused multiply-add; this plain form can
 * differ from it by one ulp in m.)
 *
 * SGD with momentum follows torch.optim.SGD (dampening 0, no Nesterov):
 *   buf = momentum * buf + g       (the first step sees buf = 0, so buf = g,
 *                                    like PyTorch's clone on the first step)
 *   p   = p - lr * buf              (p - lr * g when momentum == 0; buf unused)
 * but its weight decay is DECOUPLED like AdamW's: p = p * (1 - lr*wd) before the
 * update, not PyTorch SGD's coupled g += wd * p. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

#include "util/bf16.h"

typedef struct adamw_coef {
    float decay, w1, beta2, w2, neg_step, bc2_sqrt, eps;
} adamw_coef;

/* The coefficients of step p->step, formed in double and rounded as the header says. */
static adamw_coef adamw_coef_of(const ft_adamw_params *p)
{
    double lr = p->lr, b1 = p->beta1, b2 = p->beta2, t = (double)p->step;
    double bc1 = 1.0 - pow(b1, t);
    double bc2 = 1.0 - pow(b2, t);
    return (adamw_coef){ .decay = (float)(1.0 - lr * (double)p->weight_decay),
                         .w1 = (float)(1.0 - b1), .beta2 = p->beta2, .w2 = (float)(1.0 - b2),
                         .neg_step = (float)(-(lr / bc1)), .bc2_sqrt = (float)sqrt(bc2),
                         .eps = p->eps };
}

/* One element's update (the header's formulas) of parameter p0 with gradient g_raw x
 * scale (clipping) and the decay factor `decay` (c->decay, or 1 for an element exempt
 * from weight decay: p * 1 is p, the bits of an update with weight_decay 0), from moments
 * m0 and v0; writes the new moments to *m, *v and returns the new parameter. */
static inline float adamw_value(const adamw_coef *c, float decay, float p0, float g_raw,
                                float scale, float m0, float v0, float *m, float *v)
{
    const float g = g_raw * scale;
    float pi = p0 * decay;
    float mi = m0 + c->w1 * (g - m0);
    float vi = v0 * c->beta2 + (c->w2 * g) * g;
    float den = sqrtf(vi) / c->bc2_sqrt + c->eps;
    *m = mi;
    *v = vi;
    return pi + (c->neg_step * mi) / den;
}

/* The update of elements [0, n), from the stored moments, or from zeros without reading
 * them (ft_adamw_params.moments_zero: the same expressions with m0 = v0 = +0, which the
 * compiler may simplify only where IEEE arithmetic gives the same bits, so the result is
 * that of reading stored zeros). */
#define ADAMW_LOOP(M0, V0, STORE)                                                          \
    _Pragma("omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)")             \
    for (size_t i = 0; i < n; i++)                                                         \
        STORE(param[i] = adamw_value(&c, i < nd ? c.decay : 1.0f, param[i], grad[i], s, M0, \
                                     V0, &m[i], &v[i]))
#define ADAMW_STORE_NOTHING(x) (void)(x)
#define ADAMW_STORE_BITS(x) bits[i] = ft_f32_to_bf16(x)

void ft_cpu_adamw_step(ft_backend *be, float *param, const float *grad, float *m, float *v,
                       size_t n, const ft_adamw_params *p)
{
    (void)be;
    const adamw_coef c = adamw_coef_of(p);
    uint16_t *bits = p->bf16_out; /* the bf16 working copy in the same pass */
    const float s = p->grad_scale;
    const size_t nd = p->no_decay_from ? p->no_decay_from : n; /* decayed: [0, nd) */
    if (p->moments_zero && bits)
        ADAMW_LOOP(0.0f, 0.0f, ADAMW_STORE_BITS);
    else if (p->moments_zero)
        ADAMW_LOOP(0.0f, 0.0f, ADAMW_STORE_NOTHING);
    else if (bits)
        ADAMW_LOOP(m[i], v[i], ADAMW_STORE_BITS);
    else
        ADAMW_LOOP(m[i], v[i], ADAMW_STORE_NOTHING);
}

void ft_cpu_adamw_rows_bf16(ft_backend *be, uint16_t *out, const float *param, const float *grad,
                            const float *m, const float *v, const int32_t *rows, size_t n_rows,
                            size_t row_len, const ft_adamw_params *p)
{
    (void)be;
    const adamw_coef c = adamw_coef_of(p);
    const float s = p->grad_scale;
    const size_t nd = p->no_decay_from ? p->no_decay_from : SIZE_MAX; /* decayed: [0, nd) */
    const bool zero = p->moments_zero;
#pragma omp parallel for schedule(static) if (n_rows * row_len >= FT_CPU_PAR_MIN)
    for (size_t k = 0; k < n_rows; k++) {
        const size_t base = (size_t)rows[k] * row_len;
        for (size_t j = 0; j < row_len; j++) {
            const size_t i = base + j;
            float mi, vi;
            const float pn = adamw_value(&c, i < nd ? c.decay : 1.0f, param[i], grad[i],
                                         s, zero ? 0.0f : m[i], zero ? 0.0f : v[i], &mi, &vi);
            out[k * row_len + j] = ft_f32_to_bf16(pn);
        }
    }
}

/* One element's momentum step from buffer value b0; writes the buffer, returns p. */
static inline float sgd_update(float mu, float decay, float lr, float b0, float g,
                               const float *param, float *buf)
{
    const float b = mu * b0 + g;
    *buf = b;
    return *param * decay - lr * b;
}

void ft_cpu_sgd_step(ft_backend *be, float *param, const float *grad, float *momentum_buf,
                     size_t n, const ft_sgd_params *p)
{
    const float decay = (float)(1.0 - (double)p->lr * (double)p->weight_decay);
    const float lr = p->lr;
    const float mu = p->momentum, s = p->grad_scale;
    if (mu == 0.0f || !momentum_buf) {
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            param[i] = param[i] * decay - lr * (grad[i] * s);
        return;
    }
    if (p->moments_zero) { /* buf = mu * (+0) + g: as ADAMW_LOOP, without reading it */
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            param[i] = sgd_update(mu, decay, lr, 0.0f, grad[i] * s, &param[i], &momentum_buf[i]);
        return;
    }
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        param[i] = sgd_update(mu, decay, lr, momentum_buf[i], grad[i] * s, &param[i],
                              &momentum_buf[i]);
}
