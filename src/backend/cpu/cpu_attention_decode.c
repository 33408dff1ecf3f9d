/* Attention of new tokens against a key/value cache (incremental decoding).
 *
 * For new token i (absolute position p = past + i) and query head h, with kv head
 * g = h / (n_heads / n_kv_heads) and scale = 1/sqrt(head_dim):
 *   s_j = k_j . (scale q)      for every cached key j <= p (and, with a sliding
 *                              window W > 0, j > p - W)
 *   m   = max_j s_j,   w_j = exp(s_j - m),   l = sum_j w_j
 *   o   = (sum_j w_j v_j) / l
 * The scale is folded into q before the dot products, as the flash-attention
 * forward does, so both paths round the same scaled query. Decoding has few queries
 * and many keys, so a plain two-pass softmax over one score row per (token, head)
 * is the whole algorithm: the scores fit in a per-thread buffer of past+n_new
 * floats, and no tiling or online rescaling is needed.
 *
 * Work is split over (token, head) pairs; each pair is computed by one thread in a
 * fixed order, so results do not depend on the number of threads. Per-thread score
 * scratch is malloc'd for the call; the vtable has no error path, so a failed
 * allocation aborts with a message. */
#include "backend/attention_mask.h"
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* One (token, head) pair: o[hd] from q[hd] against keys first .. first+n_keys-1 of
 * kv head g. */
static void decode_one(float *o, const float *q, const float *k_cache, const float *v_cache,
                       size_t kv_stride, int g, int hd, int first, int n_keys, float scale,
                       float *scores, float *qs)
{
    k_cache += (size_t)first * kv_stride;
    v_cache += (size_t)first * kv_stride;
    for (int d = 0; d < hd; d++)
        qs[d] = q[d] * scale;
    float m = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        const float *kj = k_cache + (size_t)j * kv_stride + (size_t)g * hd;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int d = 0; d < hd; d++)
            s += kj[d] * qs[d];
        scores[j] = s;
        m = s > m ? s : m;
    }
    float l = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        scores[j] = expf(scores[j] - m);
        l += scores[j];
    }
    for (int d = 0; d < hd; d++)
        o[d] = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        const float *vj = v_cache + (size_t)j * kv_stride + (size_t)g * hd;
        const float w = scores[j];
#pragma omp simd
        for (int d = 0; d < hd; d++)
            o[d] += w * vj[d];
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int d = 0; d < hd; d++)
        o[d] *= inv;
}

void ft_cpu_attention_decode(ft_backend *be, float *out, const float *q, const float *k_cache,
                             const float *v_cache, int past, int n_new, int n_heads,
                             int n_kv_heads, int head_dim, int window)
{
    if (n_new <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || past < 0)
        return;
    const int group = n_heads / n_kv_heads;
    const size_t q_stride = (size_t)n_heads * head_dim;
    const size_t kv_stride = (size_t)n_kv_heads * head_dim;
    const float scale = 1.0f / sqrtf((float)head_dim);
    const int max_keys = past + n_new;
    const long tasks = (long)n_new * n_heads;
    /* Below ~FT_CPU_PAR_MIN multiply-adds a team costs more than it saves. */
    const int parallel = tasks > 1 && (size_t)tasks * max_keys * head_dim > FT_CPU_PAR_MIN;
#pragma omp parallel if (parallel)
    {
        float *scratch = malloc(((size_t)max_keys + (size_t)head_dim) * sizeof(float));
        if (!scratch) {
            fprintf(stderr, "ftmpi: CPU attention_decode: out of memory for %d scores\n",
                    max_keys);
            abort();
        }
#pragma omp for schedule(static)
        for (long t = 0; t < tasks; t++) {
            const int i = (int)(t / n_heads), h = (int)(t % n_heads);
            const int last = past + i; /* the token's own position */
            const int first = ft_mask_first_key(last, window);
            decode_one(out + (size_t)i * q_stride + (size_t)h * head_dim,
                       q + (size_t)i * q_stride + (size_t)h * head_dim, k_cache, v_cache,
                       kv_stride, h / group, head_dim, first, last - first + 1, scale, scratch,
                       scratch + max_keys);
        }
        free(scratch);
    }
}
