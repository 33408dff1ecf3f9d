/* Engine set-up: geometry, allocation, memory accounting. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

/* The one place engine memory is allocated and counted. In a dry run (the planner)
 * nothing is allocated: the same code path only counts, so estimates and real
 * allocations cannot drift apart. */
void *ft_engine_alloc(ft_engine *e, size_t bytes, size_t *counter)
{
    static char dry_run_token;
    if (e->dry_run) {
        if (counter)
            *counter += bytes;
        return &dry_run_token;
    }
    void *p = e->be->ops->alloc(e->be, bytes);
    if (p && counter)
        *counter += bytes;
    if (!p)
        e->failed = 1;
    return p;
}

void *ft_engine_alloc_opt(ft_engine *e, size_t bytes, size_t *device_counter)
{
    if (!e->opt.offload_optimizer)
        return ft_engine_alloc(e, bytes, device_counter);
    static char dry_run_token;
    e->mem.host += bytes;
    if (e->dry_run)
        return &dry_run_token;
    void *p = e->opt_be->ops->alloc(e->opt_be, bytes);
    if (!p)
        e->failed = 1;
    return p;
}

static void plan_geometry(ft_engine *e)
{
    const size_t P = (size_t)e->size;
    e->n_gather = e->n_grad = e->layout.config.tie_word_embeddings ? 3 : 2;
    for (int u = 0; u < e->layout.n_units; u++) {
        engine_unit *eu = &e->units[u];
        eu->numel = e->layout.units[u].numel;
        eu->padded = (eu->numel + P - 1) / P * P;
        eu->shard = eu->padded / P;
        if (e->opt.zero_stage == 0) {
            eu->opt_begin = 0;
            eu->opt_end = eu->numel;
        } else {
            ft_engine_own_range(e, eu, &eu->opt_begin, &eu->opt_end);
        }
        if (eu->padded > e->max_padded)
            e->max_padded = eu->padded;
        if (eu->shard > e->max_shard)
            e->max_shard = eu->shard;
    }
}

static void allocate_unit(ft_engine *e, engine_unit *eu)
{
    const int stage = e->opt.zero_stage, bf16 = e->opt.precision.has_master;
    const int offload = e->opt.offload_optimizer, bits = ft_engine_hands_bits(e);
    /* optimizer buffers span the shard length (stage >= 1) so gathers can read the
     * master directly, padding included */
    const size_t opt_len = ft_engine_opt_len(e, eu);
    ft_engine_memory *m = &e->mem;
    if (e->opt.frozen) {
        ft_engine_frozen_allocate_unit(e, eu);
        return;
    }
    if (stage <= 2)
        eu->full = ft_engine_alloc(e, eu->padded * (bits ? sizeof(uint16_t) : sizeof(float)),
                                   &m->params);
    /* stage 0 with bits: loading gathers the fp32 unit into the master, padding included */
    const size_t master_len = stage == 0 && bits ? eu->padded : opt_len;
    if (stage >= 1 || bf16 || offload)
        eu->master = ft_engine_alloc_opt(e, master_len * sizeof(float),
                                         stage == 3 && !bf16 ? &m->params : &m->optimizer);
    if (stage == 3 && bf16 && (!bits || offload))
        eu->shard_bf16 = ft_engine_alloc(e, eu->shard * sizeof(uint16_t), &m->params);
    if (stage == 3 && !bf16 && offload)
        eu->dev_shard = ft_engine_alloc(e, eu->shard * sizeof(float), &m->params);
    eu->m = ft_engine_alloc_opt(e, opt_len * sizeof(float), &m->optimizer);
    if (e->opt.optimizer == FT_OPT_ADAMW)
        eu->v = ft_engine_alloc_opt(e, opt_len * sizeof(float), &m->optimizer);
    if (stage <= 1)
        eu->grad_full = ft_engine_alloc(e, eu->padded * sizeof(float), &m->grads);
    else
        eu->grad_shard = ft_engine_alloc(e, eu->shard * sizeof(float), &m->grads);
}

/* Stage 3's gathered units: fp32 (the model takes fp32) and/or bf16 bits (the
 * gather of bf16 working parameters). */
static void allocate_gather_pool(ft_engine *e)
{
    const int bf16 = e->opt.precision.has_master, bits = ft_engine_hands_bits(e);
    for (int i = 0; i < e->n_gather; i++) {
        e->gather[i].unit = -1;
        if (e->opt.zero_stage == 3) {
            if (!bits)
                e->gather[i].params =
                    ft_engine_alloc(e, e->max_padded * sizeof(float), &e->mem.gathered);
            if (bf16)
                e->gather[i].bits = ft_engine_alloc(e, e->max_padded * sizeof(uint16_t),
                                                    &e->mem.gathered);
        }
    }
}

static void allocate_pools(ft_engine *e)
{
    const int stage = e->opt.zero_stage, bf16 = e->opt.precision.has_master;
    const int bits = ft_engine_hands_bits(e);
    ft_engine_memory *m = &e->mem;
    e->bits_unit[0] = e->bits_unit[1] = -1; /* no staging slot holds a unit */
    if (e->opt.frozen) {
        ft_engine_frozen_allocate_scratch(e);
        allocate_gather_pool(e);
        return;
    }
    /* the next lookup's embedding rows, made ahead of the update (engine_lookup.c) */
    const size_t lookup_bytes = ft_engine_lookup_bytes(e);
    if (lookup_bytes)
        e->lookup.buf = ft_engine_alloc(e, lookup_bytes, &m->scratch);
    /* the gradient norm's sums when they start beside the backward (engine_overlap.c):
     * a double a unit, allocated whether or not, so that the plan need not know */
    e->norm_sums = ft_engine_alloc(e, (size_t)e->layout.n_units * sizeof(double), &m->scratch);
    if (e->opt.offload_optimizer) {
        ft_engine_offload_allocate(e);
        /* stage 0 with bits gathers loaded units here, padding included */
        if (stage == 0 && bits)
            e->dev_master = ft_engine_alloc(e, e->max_padded * sizeof(float), &m->scratch);
    }
    if ((stage == 1 || stage == 2) && bf16)
        e->stage_bits = ft_engine_alloc(e, e->max_shard * sizeof(uint16_t), &m->scratch);
    if (bf16 && !bits)
        e->gather_bits = ft_engine_alloc(e, e->max_padded * sizeof(uint16_t), &m->scratch);
    allocate_gather_pool(e);
    const int rbf16 = (e->opt.precision.reduction == FT_DTYPE_BF16);
    if (stage <= 1 && rbf16) /* two when the reductions run beside the backward */
        for (int i = 0; i < (ft_engine_early_reduce_wanted(e) ? 2 : 1); i++)
            e->bits_slot[i] = ft_engine_alloc(e, e->max_padded * sizeof(uint16_t), &m->scratch);
    for (int i = 0; i < e->n_grad; i++) {
        grad_slot *g = &e->grads[i];
        g->unit = -1;
        if (stage >= 2) {
            const int staged = ft_engine_bf16_grad_staging(e);
            g->full = ft_engine_alloc(e, e->max_padded * (staged ? sizeof(uint16_t) : sizeof(float)),
                                      &m->gathered);
            g->shard_tmp = ft_engine_alloc(e, e->max_shard * sizeof(float), &m->gathered);
            if (rbf16 && !staged)
                g->bits_full = ft_engine_alloc(e, e->max_padded * sizeof(uint16_t), &m->gathered);
            if (rbf16)
                g->bits_shard = ft_engine_alloc(e, e->max_shard * sizeof(uint16_t), &m->gathered);
        }
    }
}

/* A frozen engine has no optimizer state to offload. */
static ft_engine_options effective_options(const ft_engine_options *opt)
{
    ft_engine_options o = *opt;
    o.offload_optimizer = opt->offload_optimizer && !opt->frozen;
    return o;
}

int ft_engine_create(ft_engine **out, const ft_model_layout *layout, ft_backend *be,
                     ft_comm *comm, const ft_engine_options *opt, ft_error *err)
{
    *out = NULL;
    if (opt->zero_stage < 0 || opt->zero_stage > 3)
        return ft_fail(err, "zero_stage %d: must be 0, 1, 2 or 3", opt->zero_stage);
    if (opt->precision.weights == FT_DTYPE_BF16 && !opt->precision.has_master)
        return ft_fail(err, "bf16 model parameters need bf16 working parameters (an fp32 master)");
    ft_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ft_fail(err, "out of host memory");
    e->layout = *layout;
    e->be = be;
    e->comm = comm;
    e->opt = effective_options(opt);
    e->rank = comm->rank;
    e->size = comm->size;
    e->opt_be = be;
    e->unset_mode = ft_engine_unset_mode_from_env();
    if (e->opt.offload_optimizer && ft_backend_cpu_create(&e->opt_be, err)) {
        free(e);
        return ft_fail_context(err, "offload_optimizer");
    }
    e->units = calloc((size_t)layout->n_units, sizeof *e->units);
    e->plan_cap = 2 * layout->n_units + 4;
    e->plan = calloc((size_t)e->plan_cap, sizeof *e->plan);
    if (!e->units || !e->plan) {
        ft_engine_free(e);
        return ft_fail(err, "out of host memory");
    }
    plan_geometry(e);
    for (int u = 0; u < layout->n_units && !e->failed; u++)
        allocate_unit(e, &e->units[u]);
    if (!e->failed)
        allocate_pools(e);
    e->overlap = !e->failed && ft_engine_overlap_wanted(e);
    e->early_norm = e->overlap && ft_engine_early_norm_wanted(e);
    e->early_reduce = !e->failed && ft_engine_early_reduce_wanted(e);
    e->gather_overlap = !e->failed && ft_engine_gather_overlap_wanted(e);
    e->lookup_ahead = !e->failed && ft_engine_lookup_wanted(e);
    if (e->failed) {
        ft_engine_memory m = e->mem;
        ft_engine_free(e);
        return ft_fail(err, "cannot allocate model state on the %s backend (%zu MiB allocated "
                       "before failing); use more ranks, a higher zero_stage or offload",
                       be->name, (m.params + m.grads + m.optimizer + m.scratch) >> 20);
    }
    *out = e;
    return 0;
}

void ft_engine_free(ft_engine *e)
{
    if (!e)
        return;
    ft_backend *be = e->be;
    if (e->units)
        ft_engine_settle_updates(e);
    ft_engine_flush_grads(e, NULL);
    for (int i = 0; i < e->n_gather; i++) {
        if (e->gather[i].req)
            ft_comm_wait(e->comm, e->gather[i].req, NULL);
        be->ops->free(be, e->gather[i].params);
        be->ops->free(be, e->gather[i].bits);
    }
    for (int i = 0; i < e->n_grad; i++) {
        be->ops->free(be, e->grads[i].full);
        be->ops->free(be, e->grads[i].shard_tmp);
        be->ops->free(be, e->grads[i].bits_full);
        be->ops->free(be, e->grads[i].bits_shard);
    }
    be->ops->free(be, e->bits_slot[0]);
    be->ops->free(be, e->bits_slot[1]);
    be->ops->free(be, e->norm_sums);
    ft_backend *obe = e->opt_be ? e->opt_be : be;
    if (e->units)
        for (int u = 0; u < e->layout.n_units; u++) {
            engine_unit *eu = &e->units[u];
            void *bufs[] = { eu->full, eu->shard_bf16, eu->dev_shard, eu->grad_full,
                             eu->grad_shard };
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                be->ops->free(be, bufs[i]);
            obe->ops->free(obe, eu->master);
            obe->ops->free(obe, eu->m);
            obe->ops->free(obe, eu->v);
        }
    ft_engine_offload_free(e);
    be->ops->free(be, e->dev_master);
    be->ops->free(be, e->stage_f32);
    be->ops->free(be, e->stage_bits);
    be->ops->free(be, e->gather_bits);
    ft_engine_lookup_free(e);
    free(e->units);
    free(e->plan);
    if (e->opt_be && e->opt_be != be)
        ft_backend_destroy(e->opt_be);
    free(e);
}

int ft_engine_estimate(const ft_model_layout *layout, int world_size,
                       const ft_engine_options *opt, ft_engine_memory *mem, ft_error *err)
{
    ft_engine e;
    memset(&e, 0, sizeof e);
    e.dry_run = 1;
    e.layout = *layout;
    e.opt = effective_options(opt);
    e.rank = 0; /* rank 0 holds the largest slices */
    e.size = world_size;
    e.units = calloc((size_t)layout->n_units, sizeof *e.units);
    if (!e.units)
        return ft_fail(err, "out of host memory");
    plan_geometry(&e);
    for (int u = 0; u < layout->n_units; u++)
        allocate_unit(&e, &e.units[u]);
    allocate_pools(&e);
    free(e.units);
    *mem = e.mem;
    return 0;
}

unsigned ft_engine_beside_compute(const ft_engine *e)
{
    return (e->overlap ? FT_ENGINE_BESIDE_UPDATE : 0u) |
           (e->early_norm ? FT_ENGINE_BESIDE_NORM : 0u) |
           (e->early_reduce ? FT_ENGINE_BESIDE_REDUCE : 0u) |
           (e->gather_overlap && e->size > 1 ? FT_ENGINE_BESIDE_GATHER : 0u) |
           (e->lookup_ahead ? FT_ENGINE_BESIDE_LOOKUP : 0u);
}

long ft_engine_step_count(const ft_engine *e) { return e->step; }
ft_engine_memory ft_engine_memory_usage(const ft_engine *e) { return e->mem; }

size_t ft_engine_padded_unit(const ft_engine *e, int unit) { return e->units[unit].padded; }

size_t ft_engine_padded_total(const ft_engine *e)
{
    size_t n = 0;
    for (int u = 0; u < e->layout.n_units; u++)
        n += e->units[u].padded;
    return n;
}
