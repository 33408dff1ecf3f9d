/* GELU, the two forms of Hugging Face configs (ft_gelu_kind):
 *   erf  ("gelu"):     gelu(x) = x Phi(x),  Phi(x) = 0.5 (1 + erf(x / sqrt 2))
 *                      gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
 *   tanh ("gelu_new"): u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715, t = tanh(u)
 *                      gelu(x) = 0.5 x (1 + t)
 *                      gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
 * Elementwise, in fp32 with libm's erff/tanhf/expf (accurate to a few ulp). The kind
 * is tested once per call, outside the loops. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

#define GELU_INV_SQRT2 0.70710678118654752f
#define GELU_INV_SQRT_2PI 0.39894228040143268f
#define GELU_TANH_K 0.79788456080286536f /* sqrt(2/pi) */
#define GELU_TANH_C 0.044715f

void ft_cpu_gelu_fwd(ft_backend *be, ft_gelu_kind kind, float *out, const float *x, size_t n)
{
    (void)be;
    if (kind == FT_GELU_TANH) {
#pragma omp parallel for schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            float t = tanhf(GELU_TANH_K * (v + GELU_TANH_C * v * v * v));
            out[i] = 0.5f * v * (1.0f + t);
        }
    } else {
#pragma omp parallel for schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            out[i] = 0.5f * v * (1.0f + erff(v * GELU_INV_SQRT2));
        }
    }
}

/* dx may alias dout: each element reads dout[i] before writing dx[i]. */
void ft_cpu_gelu_bwd(ft_backend *be, ft_gelu_kind kind, float *dx, const float *dout,
                     const float *x, size_t n)
{
    (void)be;
    if (kind == FT_GELU_TANH) {
#pragma omp parallel for schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            float t = tanhf(GELU_TANH_K * (v + GELU_TANH_C * v * v * v));
            float du = GELU_TANH_K * (1.0f + 3.0f * GELU_TANH_C * v * v);
            float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
            dx[i] = dout[i] * d;
        }
    } else {
#pragma omp parallel for schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            float cdf = 0.5f * (1.0f + erff(v * GELU_INV_SQRT2));
            float pdf = GELU_INV_SQRT_2PI * expf(-0.5f * v * v);
            dx[i] = dout[i] * (cdf + v * pdf);
        }
    }
}
