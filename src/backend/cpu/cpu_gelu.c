/* GELU, the two forms of Hugging Face configs (ft_gelu_kind):
 *   erf  ("gelu"):     gelu(x) = x Phi(x),  Phi(x) = 0.5 (1 + erf(x / sqrt 2))
 *                      gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
 *   tanh ("gelu_new"): u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715, t = tanh(u)
 *                      gelu(x) = 0.5 x (1 + t)
 *                      gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
 * Elementwise in fp32. libm's erff and tanhf do not vectorise (~20 ns an element
 * here, 20x SwiGLU: a sizeable share of an MLP next to its GEMMs), so both are built
 * below from ft_cpu_expf and polynomials, branch-free, and the loops vectorise.
 * test_cpu_gelu holds the results to double references. The kind is tested once per
 * call, outside the loops. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <math.h>

#define GELU_INV_SQRT2 0.70710678118654752f
#define GELU_INV_SQRT_2PI 0.39894228040143268f
#define GELU_TANH_K 0.79788456080286536f /* sqrt(2/pi) */
#define GELU_TANH_C 0.044715f

/* 1 + erf(z), computed so that it keeps its relative accuracy where erf(z) -> -1.
 *  |z| < 0.5: the Taylor series erf(z) = 2/sqrt(pi) sum_k (-1)^k z^(2k+1) / (k! (2k+1)),
 *             k = 0..6 (the first term left out is below 5e-10).
 *  |z| >= 0.5: erfc(|z|) = exp(-z^2) g(s), s = 1 / (1 + |z|/2), g a degree-9 polynomial
 *             in s fitted to erfc(z) e^(z^2) on [0.5, 10] (weighted least squares
 *             iterated toward minimax relative error: 1.3e-9 in exact arithmetic,
 *             ~3e-7 as evaluated in fp32); 1 + erf(z) is then 2 - erfc(z) for z > 0
 *             and erfc(-z) for z < 0. exp(-z^2) underflows to 0 past |z| ~ 9.3, as
 *             erfc does in fp32.
 * Both branches are evaluated and one is selected. */
static inline float one_plus_erf(float z)
{
    const float az = fabsf(z), z2 = z * z;
    float p = -8.548327023e-04f;
    p = p * z2 + 5.223977625e-03f;
    p = p * z2 - 2.686617065e-02f;
    p = p * z2 + 1.128379167e-01f;
    p = p * z2 - 3.761263890e-01f;
    p = p * z2 + 1.128379167e+00f; /* 2/sqrt(pi) */
    const float taylor = 1.0f + z * p;

    const float s = 1.0f / (1.0f + 0.5f * az);
    float g = -7.463428109e-02f;
    g = g * s + 3.521934740e-01f;
    g = g * s - 6.127508421e-01f;
    g = g * s + 4.083042009e-01f;
    g = g * s - 1.094443735e-01f;
    g = g * s + 2.360215594e-01f;
    g = g * s + 2.346465431e-01f;
    g = g * s + 2.836747168e-01f;
    g = g * s + 2.819770153e-01f;
    g = g * s + 3.838239654e-06f;
    const float erfc_abs = ft_cpu_expf(-z2) * g;
    const float tail = z > 0.0f ? 2.0f - erfc_abs : erfc_abs;
    return az < 0.5f ? taylor : tail;
}

/* The tanh form needs 1 + t and 1 - t^2 = (1 + t)(1 - t), t = tanh(u). With
 * e = exp(-2|u|) in [0, 1] (no overflow):
 *   1 + t = 2 / (1 + e) for u >= 0,  2e / (1 + e) for u < 0,  and 1 - t mirrored,
 * which keep their relative accuracy where t -> +-1 (1 + tanh(u) itself cancels there:
 * the far tails of gelu and gelu' would be lost). */
typedef struct tanh_parts {
    float one_plus_t, one_minus_t;
} tanh_parts;

static inline tanh_parts tanh_parts_of(float u)
{
    const float e = ft_cpu_expf(-2.0f * fabsf(u));
    const float r = 1.0f / (1.0f + e);
    const float big = 2.0f * r, small = 2.0f * e * r;
    tanh_parts p = { u >= 0.0f ? big : small, u >= 0.0f ? small : big };
    return p;
}

/* u = k (x + c x^3), the argument of the tanh form's tanh. */
static inline float tanh_arg(float x)
{
    return GELU_TANH_K * (x + GELU_TANH_C * x * x * x);
}

void ft_cpu_gelu_fwd(ft_backend *be, ft_gelu_kind kind, float *out, const float *x, size_t n)
{
    (void)be;
    if (kind == FT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            const tanh_parts t = tanh_parts_of(tanh_arg(v));
            out[i] = 0.5f * v * t.one_plus_t;
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            out[i] = 0.5f * v * one_plus_erf(v * GELU_INV_SQRT2);
        }
    }
}

/* dx may alias dout: each element reads dout[i] before writing dx[i]. */
void ft_cpu_gelu_bwd(ft_backend *be, ft_gelu_kind kind, float *dx, const float *dout,
                     const float *x, size_t n)
{
    (void)be;
    if (kind == FT_GELU_TANH) {
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            const tanh_parts t = tanh_parts_of(tanh_arg(v));
            const float du = GELU_TANH_K * (1.0f + 3.0f * GELU_TANH_C * v * v);
            const float sech2 = t.one_plus_t * t.one_minus_t; /* 1 - t^2 */
            dx[i] = dout[i] * (0.5f * t.one_plus_t + 0.5f * v * sech2 * du);
        }
    } else {
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            const float cdf = 0.5f * one_plus_erf(v * GELU_INV_SQRT2);
            const float pdf = GELU_INV_SQRT_2PI * ft_cpu_expf(-0.5f * v * v);
            dx[i] = dout[i] * (cdf + v * pdf);
        }
    }
}
