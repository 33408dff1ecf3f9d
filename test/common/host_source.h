/* A parameter source over plain host arrays (one float array per unit), for model
 * tests on the CPU backend, whose memory is host memory: no engine, no collective.
 * grads NULL makes the units frozen: asking for a gradient fails the test. With a
 * layout, acquires of an untied embedding after the head (a backward's) are counted. */
#ifndef FT_TEST_HOST_SOURCE_H
#define FT_TEST_HOST_SOURCE_H

#include <stdlib.h>
#include <string.h>

#include "model/model.h"

typedef struct host_src {
    const ft_model_layout *layout; /* optional: counts acquires_after_head */
    float **params, **grads;
    int acquires_after_head;
    int head_seen;
} host_src;

static const void *hs_acquire(void *ctx, int u)
{
    host_src *h = ctx;
    const ft_model_layout *l = h->layout;
    if (l && l->units[u].kind == FT_UNIT_HEAD)
        h->head_seen = 1;
    else if (l && u == 0 && h->head_seen && l->units[0].kind == FT_UNIT_EMBED &&
             !l->config.tie_word_embeddings)
        h->acquires_after_head++;
    return h->params[u];
}

static void *hs_grads(void *ctx, int u)
{
    host_src *h = ctx;
    if (!h->grads)
        fail_msg("a frozen unit's gradient (unit %d) was asked for", u);
    return h->grads[u];
}

static void hs_none(void *ctx, int u) { (void)ctx, (void)u; }

static inline ft_param_source source_of(host_src *h)
{
    return (ft_param_source){ .ctx = h, .acquire = hs_acquire, .grads = hs_grads,
                              .release = hs_none, .grad_done = hs_none,
                              .grad_dtype = FT_DTYPE_F32 };
}

/* One zeroed float array per unit of l. */
static inline float **alloc_units(const ft_model_layout *l)
{
    float **p = calloc((size_t)l->n_units, sizeof *p);
    for (int u = 0; u < l->n_units; u++)
        p[u] = calloc(l->units[u].numel, sizeof(float));
    return p;
}

static inline void free_units(const ft_model_layout *l, float **p)
{
    for (int u = 0; u < l->n_units; u++)
        free(p[u]);
    free(p);
}

static inline void zero_units(const ft_model_layout *l, float **p)
{
    for (int u = 0; u < l->n_units; u++)
        memset(p[u], 0, l->units[u].numel * sizeof(float));
}

#endif
