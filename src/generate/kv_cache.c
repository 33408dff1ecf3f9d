#include "generate/kv_cache.h"

#include <stdlib.h>

size_t ft_kv_cache_bytes(const ft_model_config *mc, ft_dtype dt, int capacity)
{
    return 2 * (size_t)mc->num_hidden_layers * (size_t)capacity *
           (size_t)mc->num_key_value_heads * (size_t)mc->head_dim * ft_dtype_size(dt);
}

int ft_kv_cache_init(ft_kv_cache *c, ft_backend *be, const ft_model_config *mc, ft_dtype dt,
                     int capacity, ft_error *err)
{
    *c = (ft_kv_cache){ .be = be, .n_layers = mc->num_hidden_layers, .capacity = capacity,
                        .dt = dt,
                        .kv_dim = mc->num_key_value_heads * mc->head_dim };
    if (capacity < 1)
        return ft_fail(err, "KV cache: capacity must be positive");
    c->k = calloc((size_t)c->n_layers + 1, sizeof *c->k);
    c->v = calloc((size_t)c->n_layers + 1, sizeof *c->v);
    if (!c->k || !c->v) {
        ft_kv_cache_free(c);
        return ft_fail(err, "out of host memory");
    }
    const size_t bytes = (size_t)capacity * (size_t)c->kv_dim * ft_dtype_size(dt);
    for (int l = 0; l < c->n_layers; l++) {
        c->k[l] = be->ops->alloc(be, bytes);
        c->v[l] = be->ops->alloc(be, bytes);
        if (!c->k[l] || !c->v[l]) {
            ft_kv_cache_free(c);
            return ft_fail(err, "KV cache: cannot allocate %zu MiB on the %s backend for %d "
                           "positions; lower --max-new-tokens or the prompt length",
                           ft_kv_cache_bytes(mc, dt, capacity) >> 20, be->name, capacity);
        }
    }
    return 0;
}

void ft_kv_cache_free(ft_kv_cache *c)
{
    if (!c->be)
        return;
    for (int l = 0; c->k && l < c->n_layers; l++)
        c->be->ops->free(c->be, c->k[l]);
    for (int l = 0; c->v && l < c->n_layers; l++)
        c->be->ops->free(c->be, c->v[l]);
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
    c->len = 0;
}
