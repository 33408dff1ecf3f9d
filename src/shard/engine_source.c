/* The engine as the model's parameter source.
 *
 * Stages 0-2 hand out resident full units. Stage 3 gathers a unit into a pool slot on
 * acquire and starts gathering the next unit of the announced plan at once, so the
 * all-gather of unit i+1 runs while unit i computes; a released slot keeps its unit
 * until the slot is needed again (a unit used twice in a row, like the embedding of a
 * tied head, is not gathered twice).
 *
 * Stages 2-3 give the model a transient full-unit gradient on first grads(u) (zeroed, or
 * with its 2-D part unset for grads_first: engine_unset.c) and reduce-scatter it into
 * the rank's gradient shard on grad_done(u), nonblocking; the sum into the shard happens
 * when the slot is next needed or at flush.
 *
 * Collectives are started in the same order on every rank because every rank runs the
 * same sequence of model calls and this code's choices depend only on that sequence.
 */
#include <string.h>

#include "shard/engine_internal.h"

void ft_engine_record_failure(ft_engine *e, const char *what, int unit)
{
    if (!e->failed) {
        e->failed = 1;
        if (!e->error.msg[0])
            ft_fail(&e->error, "%s of unit %d failed", what, unit);
    }
}

/* ---------------------------------------------------------------- stage 3 gathers */

static gather_slot *find_gathered(ft_engine *e, int unit)
{
    for (int i = 0; i < e->n_gather; i++)
        if (e->gather[i].unit == unit)
            return &e->gather[i];
    return NULL;
}

static void finish_gather(ft_engine *e, gather_slot *s)
{
    if (s->state != SLOT_PENDING)
        return;
    if (ft_comm_wait(e->comm, s->req, &e->error))
        ft_engine_record_failure(e, "parameter all-gather", s->unit);
    s->req = NULL;
    if (s->bits && s->params)
        e->be->ops->bf16_to_f32(e->be, s->params, s->bits, e->units[s->unit].padded);
    s->state = SLOT_READY;
}

/* A slot no one holds: empty first, else the least recently used. A pending
 * prefetch is completed before its slot is taken over. */
static gather_slot *free_slot(ft_engine *e)
{
    gather_slot *best = NULL;
    for (int i = 0; i < e->n_gather; i++) {
        gather_slot *s = &e->gather[i];
        if (s->refs > 0)
            continue;
        if (s->unit < 0)
            return s;
        if (!best || s->last_use < best->last_use)
            best = s;
    }
    if (best)
        finish_gather(e, best);
    return best;
}

static gather_slot *start_gather(ft_engine *e, int unit)
{
    gather_slot *s = free_slot(e);
    if (!s) {
        ft_engine_record_failure(e, "gather pool exhausted for", unit);
        return NULL;
    }
    const engine_unit *eu = &e->units[unit];
    int rc = s->bits ? ft_engine_start_bits_gather(e, unit, s->bits, &s->req)
                     : e->comm->ops->all_gather(e->comm, s->params,
                                                eu->dev_shard ? eu->dev_shard : eu->master,
                                                eu->shard * sizeof(float), &s->req);
    if (rc)
        ft_engine_record_failure(e, "parameter all-gather", unit);
    s->unit = unit;
    s->state = SLOT_PENDING;
    s->last_use = ++e->clock;
    return s;
}

/* Starts gathering the plan's next unit not already held. */
static void prefetch_next(ft_engine *e)
{
    if (e->plan_pos >= e->plan_len)
        return;
    int next = e->plan[e->plan_pos];
    if (find_gathered(e, next))
        return;
    for (int i = 0; i < e->n_gather; i++) /* only into a slot no one holds */
        if (e->gather[i].refs == 0) {
            start_gather(e, next);
            return;
        }
}

static const void *acquire_gathered(ft_engine *e, int unit)
{
    gather_slot *s = find_gathered(e, unit);
    if (!s)
        s = start_gather(e, unit);
    if (!s)
        return NULL;
    s->refs++;
    finish_gather(e, s);
    s->last_use = ++e->clock;
    /* advance the plan past this unit and prefetch what follows */
    for (int i = e->plan_pos; i < e->plan_len; i++)
        if (e->plan[i] == unit) {
            e->plan_pos = i + 1;
            break;
        }
    prefetch_next(e);
    return s->params ? (const void *)s->params : (const void *)s->bits;
}

void ft_engine_invalidate_gathered(ft_engine *e)
{
    for (int i = 0; i < e->n_gather; i++) {
        finish_gather(e, &e->gather[i]);
        e->gather[i].unit = -1;
        e->gather[i].state = SLOT_EMPTY;
    }
}

/* ---------------------------------------------------------------- stage 2-3 grads */

static void finish_reduce(ft_engine *e, grad_slot *g)
{
    if (!g->req)
        return;
    if (ft_comm_wait(e->comm, g->req, &e->error))
        ft_engine_record_failure(e, "gradient reduce-scatter", g->unit);
    g->req = NULL;
    engine_unit *eu = &e->units[g->unit];
    if (g->bits_shard)
        e->be->ops->bf16_to_f32(e->be, g->shard_tmp, g->bits_shard, eu->shard);
    e->be->ops->add(e->be, eu->grad_shard, g->shard_tmp, eu->shard);
    g->unit = -1;
}

static size_t grad_esize(const ft_engine *e)
{
    return ft_engine_bf16_grad_staging(e) ? sizeof(uint16_t) : sizeof(float);
}

static grad_slot *open_grad_slot(ft_engine *e, int unit)
{
    grad_slot *pick = NULL;
    for (int i = 0; i < e->n_grad; i++) {
        grad_slot *g = &e->grads[i];
        if (g->unit == unit && g->open)
            return g;
        if (!g->open && (!pick || (pick->unit >= 0 && g->unit < 0)))
            pick = g;
    }
    if (!pick) {
        ft_engine_record_failure(e, "gradient pool exhausted for", unit);
        return NULL;
    }
    finish_reduce(e, pick);
    ft_engine_reset_grad(e, unit, pick->full, grad_esize(e), &pick->unset);
    pick->unit = unit;
    pick->open = 1;
    return pick;
}

int ft_engine_flush_grads(ft_engine *e, ft_error *err)
{
    ft_engine_finish_early_reduces(e);
    for (int i = 0; i < e->n_grad; i++)
        if (!e->grads[i].open)
            finish_reduce(e, &e->grads[i]);
    if (e->failed)
        return err ? ft_fail(err, "%s", e->error.msg) : -1;
    return 0;
}

/* ---------------------------------------------------------------- the source */

static void src_plan(void *ctx, const int *units, int n)
{
    ft_engine *e = ctx;
    if (n > e->plan_cap)
        n = e->plan_cap;
    if (n > 0) /* an empty plan (units may be NULL) cancels prefetching */
        memcpy(e->plan, units, (size_t)n * sizeof *units);
    e->plan_len = n;
    e->plan_pos = 0;
    if (e->opt.zero_stage == 3)
        prefetch_next(e);
}

static const void *src_acquire(void *ctx, int unit)
{
    ft_engine *e = ctx;
    if (e->opt.zero_stage <= 2) {
        ft_engine_await_update(e, unit); /* its update may still run on the side lane */
        return e->units[unit].full;
    }
    return acquire_gathered(e, unit);
}

static const void *src_acquire_rows(void *ctx, int unit, const int32_t *ids, size_t n,
                                    const int32_t **ids_dev)
{
    ft_engine *e = ctx;
    const void *table = ft_engine_lookup_acquire(e, unit, ids, n, ids_dev);
    return table ? table : src_acquire(ctx, unit);
}

static void src_release(void *ctx, int unit)
{
    ft_engine *e = ctx;
    if (e->opt.zero_stage <= 2)
        return;
    gather_slot *s = find_gathered(e, unit);
    if (s && s->refs > 0)
        s->refs--;
}

/* The unit's gradient and where its "2-D part unset" flag lives. */
static void *grads_and_flag(ft_engine *e, int unit, int **unset)
{
    if (e->opt.zero_stage <= 1) {
        ft_engine_take_deferred_reset(e, unit); /* after acquire: the update is done */
        *unset = &e->units[unit].grad_unset;
        return e->units[unit].grad_full;
    }
    grad_slot *g = open_grad_slot(e, unit);
    *unset = g ? &g->unset : NULL;
    return g ? g->full : NULL;
}

static void *src_grads(void *ctx, int unit)
{
    ft_engine *e = ctx;
    int *unset;
    void *full = grads_and_flag(e, unit, &unset);
    if (full) /* an accumulator: zeroed if the 2-D part was left unset */
        ft_engine_settle_grad(e, unit, full, grad_esize(e), unset);
    return full;
}

static void *src_grads_first(void *ctx, int unit, bool *first)
{
    ft_engine *e = ctx;
    int *unset;
    void *full = grads_and_flag(e, unit, &unset);
    *first = full && *unset; /* the caller overwrites the 2-D part */
    if (full)
        *unset = 0;
    return full;
}

static void src_grad_done(void *ctx, int unit)
{
    ft_engine *e = ctx;
    if (e->opt.zero_stage <= 1) {
        /* on the window's last micro-batch the gradient is final: its sum of squares (one
         * rank) or its reduction (several) starts beside the rest of the backward */
        ft_engine_early_norm_unit(e, unit);
        if (ft_engine_early_reduce_unit(e, unit))
            ft_engine_record_failure(e, "gradient reduction", unit);
        return;
    }
    for (int i = 0; i < e->n_grad; i++) {
        grad_slot *g = &e->grads[i];
        if (g->unit == unit && g->open) {
            /* No host sync: the CPU backend is synchronous, and NCCL orders its stream
             * after the compute stream with an event. */
            const engine_unit *eu = &e->units[unit];
            int rc;
            if (ft_engine_bf16_grad_staging(e)) {
                rc = e->comm->ops->reduce_scatter_bf16(e->comm, g->bits_shard, g->full,
                                                       eu->shard, &g->req);
            } else if (g->bits_full) {
                e->be->ops->f32_to_bf16(e->be, g->bits_full, g->full, eu->padded);
                rc = e->comm->ops->reduce_scatter_bf16(e->comm, g->bits_shard, g->bits_full,
                                                       eu->shard, &g->req);
            } else {
                rc = e->comm->ops->reduce_scatter_f32(e->comm, g->shard_tmp, g->full, eu->shard,
                                                      &g->req);
            }
            if (rc)
                ft_engine_record_failure(e, "gradient reduce-scatter", unit);
            g->open = 0;
            return;
        }
    }
}

ft_param_source ft_engine_param_source(ft_engine *e)
{
    /* a frozen engine has no gradients: the model must not ask for them */
    return (ft_param_source){ .ctx = e, .plan = src_plan, .acquire = src_acquire,
                              .acquire_rows = src_acquire_rows,
                              .grads = e->opt.frozen ? NULL : src_grads,
                              .grads_first = e->opt.frozen ? NULL : src_grads_first,
                              .release = src_release,
                              .grad_done = e->opt.frozen ? NULL : src_grad_done,
                              .grad_dtype = ft_engine_bf16_grad_staging(e) ? FT_DTYPE_BF16
                                                                           : FT_DTYPE_F32 };
}

int ft_engine_status(ft_engine *e, ft_error *err)
{
    return e->failed ? ft_fail(err, "%s", e->error.msg) : 0;
}
