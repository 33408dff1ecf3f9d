#include "model/rope_tables.h"

#include <math.h>

/* inv_freq[i] = theta^(-2i/d) with d the rotated width (head_dim, or GPT-NeoX's
 * and GPT-J's partial rotary_dim: their frequencies span the rotated dims only).
 * The exponent and power are taken in fp32 the way HF computes them
 * (arange(0, d, 2).float() / d, then base ** that), so angles agree with the
 * reference to the last bits. */
void ft_rope_inv_freq(const ft_model_config *c, float *inv_freq)
{
    const int d = ft_model_rot_dim(c), half = d / 2;
    for (int i = 0; i < half; i++) {
        float expo = (float)(2 * i) / (float)d;
        inv_freq[i] = 1.0f / powf((float)c->rope_theta, expo);
    }
    if (c->rope_scaling.type != FT_ROPE_SCALING_LLAMA3)
        return;
    /* Llama 3.1: long wavelengths (low frequencies) are slowed down by `factor`,
     * short ones kept, and the band between blended linearly in 1/wavelength:
     *   wavelen = 2 pi / f;  low_wl = old_ctx / low_ff;  high_wl = old_ctx / high_ff
     *   wavelen < high_wl: f;  wavelen > low_wl: f / factor;
     *   else s = (old_ctx / wavelen - low_ff) / (high_ff - low_ff), (1-s) f/factor + s f */
    const ft_rope_scaling *s = &c->rope_scaling;
    const double old_ctx = s->original_max_position_embeddings;
    const double low_wl = old_ctx / s->low_freq_factor;
    const double high_wl = old_ctx / s->high_freq_factor;
    for (int i = 0; i < half; i++) {
        double f = inv_freq[i];
        double wavelen = 2.0 * M_PI / f;
        if (wavelen < high_wl)
            continue;
        if (wavelen > low_wl) {
            inv_freq[i] = (float)(f / s->factor);
        } else {
            double smooth = (old_ctx / wavelen - s->low_freq_factor) /
                            (s->high_freq_factor - s->low_freq_factor);
            inv_freq[i] = (float)((1.0 - smooth) * f / s->factor + smooth * f);
        }
    }
}

void ft_rope_tables(const ft_model_config *c, int max_pos, float *cos_table, float *sin_table)
{
    const int half = ft_model_rot_dim(c) / 2;
    float inv_freq[half];
    ft_rope_inv_freq(c, inv_freq);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            float angle = (float)p * inv_freq[i]; /* fp32 product, as the reference */
            cos_table[(size_t)p * half + i] = cosf(angle);
            sin_table[(size_t)p * half + i] = sinf(angle);
        }
}
