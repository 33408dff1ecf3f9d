/* Rotary position embedding (ft_rope_shape). In a head of head_dim values the first
 * rot_dim rotate, in rot_dim/2 pairs (a_i, b_i), the rest are left as they are:
 *   half-split  (HF Llama/NeoX): a_i = i,   b_i = i + rot_dim/2
 *   interleaved (GPT-J):         a_i = 2i,  b_i = 2i + 1
 * With angle = pos[t] * inv_freq[i], c = cos(angle), s = sin(angle) from the tables:
 *   x'_a = x_a * c - x_b * s
 *   x'_b = x_a * s + x_b * c
 * The rotation is orthogonal, so its backward is the rotation by -angle
 * (s -> -s): inverse = true. */
#include "backend/cpu/cpu_internal.h"

void ft_cpu_rope(ft_backend *be, float *x, const float *cos_table, const float *sin_table,
                 const int32_t *pos, int tokens, int n_heads, ft_rope_shape r, bool inverse)
{
    (void)be;
    const int head_dim = r.head_dim, half = r.rot_dim / 2;
    /* pair i's members: a = i * a_step, b = a + b_off */
    const int a_step = r.interleaved ? 2 : 1, b_off = r.interleaved ? 1 : half;
    float sign = inverse ? -1.0f : 1.0f;
    size_t work = (size_t)tokens * (size_t)n_heads * (size_t)head_dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int t = 0; t < tokens; t++) {
        const float *ct = cos_table + (size_t)pos[t] * half;
        const float *st = sin_table + (size_t)pos[t] * half;
        for (int h = 0; h < n_heads; h++) {
            float *xh = x + ((size_t)t * n_heads + h) * head_dim;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                float c = ct[i], s = sign * st[i];
                float a = xh[i * a_step], b = xh[i * a_step + b_off];
                xh[i * a_step] = a * c - b * s;
                xh[i * a_step + b_off] = a * s + b * c;
            }
        }
    }
}
