/* Rotary position embedding, Hugging Face half-split layout.
 * Within a head of size D, dimension i < D/2 pairs with i + D/2; with
 * angle = pos[t] * inv_freq[i], c = cos(angle), s = sin(angle):
 *   x'_i       = x_i * c - x_{i+D/2} * s
 *   x'_{i+D/2} = x_i * s + x_{i+D/2} * c
 * The rotation is orthogonal, so its backward is the rotation by -angle
 * (s -> -s): inverse = true. */
#include "backend/cpu/cpu_internal.h"

void ft_cpu_rope(ft_backend *be, float *x, const float *cos_table, const float *sin_table,
                 const int32_t *pos, int tokens, int n_heads, int head_dim, bool inverse)
{
    int half = head_dim / 2;
    float sign = inverse ? -1.0f : 1.0f;
    size_t work = (size_t)tokens * (size_t)n_heads * (size_t)head_dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int t = 0; t < tokens; t++) {
        const float *ct = cos_table + (size_t)pos[t] * half;
        const float *st = sin_table + (size_t)pos[t] * half;
        for (int h = 0; h < n_heads; h++) {
            float *x0 = x + ((size_t)t * n_heads + h) * head_dim;
            float *x1 = x0 + half;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                float c = ct[i], s = sign * st[i];
                float a = x0[i], b = x1[i];
                x0[i] = a * c - b * s;
                x1[i] = a * s + b * c;
            }
        }
    }
}
