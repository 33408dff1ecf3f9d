/* The key/value cache of one sequence: for every layer, the keys (after RoPE) and the
 * values of every position decoded so far, in the projection layout the attention
 * ops read: k[layer] is [capacity, n_kv_heads*head_dim], row p = position p.
 *
 * The decoder writes the projections of new tokens straight into rows len ..
 * len+n-1 and then advances len; nothing is ever copied or moved. Buffers live on the
 * backend and are owned by the cache. */
#ifndef FT_GENERATE_KV_CACHE_H
#define FT_GENERATE_KV_CACHE_H

#include <stddef.h>

#include "backend/backend.h"
#include "model/model_config.h"
#include "util/error.h"

typedef struct ft_kv_cache {
    ft_backend *be;   /* borrowed */
    int n_layers;
    int capacity;     /* positions */
    int kv_dim;       /* n_kv_heads * head_dim */
    int len;          /* positions filled */
    float **k, **v;   /* [n_layers] each [capacity, kv_dim] */
} ft_kv_cache;

int ft_kv_cache_init(ft_kv_cache *c, ft_backend *be, const ft_model_config *mc, int capacity,
                     ft_error *err);
void ft_kv_cache_free(ft_kv_cache *c);

/* Forgets every position (a new sequence); the buffers are kept. */
static inline void ft_kv_cache_reset(ft_kv_cache *c) { c->len = 0; }

/* Row `pos` of layer l's keys / values. */
static inline float *ft_kv_cache_k(const ft_kv_cache *c, int l, int pos)
{
    return c->k[l] + (size_t)pos * (size_t)c->kv_dim;
}
static inline float *ft_kv_cache_v(const ft_kv_cache *c, int l, int pos)
{
    return c->v[l] + (size_t)pos * (size_t)c->kv_dim;
}

/* Backend bytes a cache of this capacity takes. */
size_t ft_kv_cache_bytes(const ft_model_config *mc, int capacity);

#endif
