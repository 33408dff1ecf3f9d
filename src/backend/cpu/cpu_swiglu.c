/* SwiGLU gating: out = silu(g) * u, silu(g) = g * sigma(g), sigma(g) = 1/(1+e^-g).
 * Backward: du = dout * silu(g)
 *           dg = dout * u * silu'(g),  silu'(g) = sigma(g) * (1 + g * (1 - sigma(g))). */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

void ft_cpu_swiglu_fwd(ft_backend *be, float *out, const float *gate, const float *up, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        float sig = 1.0f / (1.0f + ft_cpu_expf(-g));
        out[i] = g * sig * up[i];
    }
}

/* out (NULL: none) = silu(g) * u as ft_cpu_swiglu_fwd computes it; it may be dout. */
void ft_cpu_swiglu_bwd(ft_backend *be, float *dgate, float *dup, const float *dout,
                       const float *gate, const float *up, size_t n, float *out)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], u = up[i];
        float sig = 1.0f / (1.0f + ft_cpu_expf(-g));
        float silu = g * sig;
        float d = dout[i];
        dup[i] = d * silu;
        dgate[i] = d * u * sig * (1.0f + g * (1.0f - sig));
        if (out)
            out[i] = silu * u;
    }
}
