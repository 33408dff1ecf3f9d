/* The key/value cache of one sequence: for every layer, the keys (after RoPE) and the
 * values of every position decoded so far, in the projection layout the attention
 * ops read: k[layer] is [capacity, n_kv_heads*head_dim], row p = position p.
 *
 * The decoder writes the projections of new tokens straight into rows len ..
 * len+n-1 and then advances len; nothing is ever copied or moved. Buffers live on the
 * backend and are owned by the cache; they are stored in the decoder's dtype (the
 * checkpoint's precision: fp32, or bf16 as the trainer stores k and v). */
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
    ft_dtype dt;      /* storage of k and v */
    void **k, **v;    /* [n_layers] each [capacity, kv_dim] */
} ft_kv_cache;

int ft_kv_cache_init(ft_kv_cache *c, ft_backend *be, const ft_model_config *mc, ft_dtype dt,
                     int capacity, ft_error *err);
void ft_kv_cache_free(ft_kv_cache *c);

/* Forgets every position (a new sequence); the buffers are kept. */
static inline void ft_kv_cache_reset(ft_kv_cache *c) { c->len = 0; }

/* Row `pos` of layer l's keys / values. */
static inline void *ft_kv_cache_k(const ft_kv_cache *c, int l, int pos)
{
    return (char *)c->k[l] + (size_t)pos * (size_t)c->kv_dim * ft_dtype_size(c->dt);
}
static inline void *ft_kv_cache_v(const ft_kv_cache *c, int l, int pos)
{
    return (char *)c->v[l] + (size_t)pos * (size_t)c->kv_dim * ft_dtype_size(c->dt);
}

/* Backend bytes a cache of this capacity takes. */
size_t ft_kv_cache_bytes(const ft_model_config *mc, ft_dtype dt, int capacity);

#endif
