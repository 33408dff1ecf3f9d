/* Gradient reduction, global norm and the (sharded) optimizer step. */
#include <math.h>
#include <stdlib.h>

#include "shard/engine_internal.h"

void ft_engine_zero_grads(ft_engine *e)
{
    if (e->opt.frozen) /* no gradients: nothing to zero */
        return;
    ft_engine_flush_grads(e, NULL);
    for (int u = 0; u < e->layout.n_units; u++) {
        engine_unit *eu = &e->units[u];
        if (!eu->grad_full)
            e->be->ops->zero(e->be, eu->grad_shard, eu->shard * sizeof(float));
        else if (!ft_engine_defer_reset(e, u)) /* its update may still read it */
            /* the 2-D part unset for the first micro-batch's GEMMs */
            ft_engine_reset_grad(e, u, eu->grad_full, sizeof(float), &eu->grad_unset);
    }
}

int ft_engine_reduce_grads(ft_engine *e, ft_error *err)
{
    if (e->opt.frozen)
        return ft_engine_frozen_refuse(err, "reducing gradients");
    ft_engine_settle_updates(e);
    if (e->opt.zero_stage >= 2)
        return ft_engine_flush_grads(e, err);
    return ft_engine_reduce_full_grads(e, err);
}

int ft_engine_grad_norm(ft_engine *e, double *norm, ft_error *err)
{
    if (e->opt.frozen)
        return ft_engine_frozen_refuse(err, "gradient norm");
    ft_engine_settle_updates(e);
    ft_engine_settle_all_grads(e);
    /* Every unit's sum: those the backward started on the side lane (engine_overlap.c),
     * then the rest in one call (one wait for the device, not one per unit); added in
     * unit order. each[nu..2nu) holds the rest's sums in their order. */
    const int nu = e->layout.n_units;
    const float **x = calloc((size_t)nu, sizeof *x);
    size_t *n = calloc((size_t)nu, sizeof *n);
    double *each = calloc(2 * (size_t)nu, sizeof *each);
    unsigned char *got = calloc((size_t)nu, 1);
    if (!x || !n || !each || !got) {
        free(x), free(n), free(each), free(got);
        return ft_fail(err, "gradient norm: out of host memory");
    }
    ft_engine_early_norm_take(e, each, got);
    int rest = 0;
    for (int u = 0; u < nu; u++) {
        if (got[u])
            continue;
        x[rest] = ft_engine_opt_grads(&e->units[u]);
        n[rest++] = e->units[u].opt_end - e->units[u].opt_begin;
    }
    if (rest > 0)
        e->be->ops->sum_squares_each(e->be, x, n, rest, each + nu);
    for (int u = 0, r = 0; u < nu; u++)
        if (!got[u])
            each[u] = each[nu + r++];
    free(got);
    double sq = 0.0;
    for (int u = 0; u < nu; u++)
        sq += each[u];
    free(x), free(n), free(each);
    /* Stage 0 holds the whole reduced gradient on every rank; the others a slice each. */
    if (e->opt.zero_stage >= 1 && e->comm->ops->all_reduce_f64_sum(e->comm, &sq, 1, err))
        return -1;
    *norm = sqrt(sq);
    return 0;
}

/* Where the update reads and writes unit element lo's parameter (within the opt range):
 * the fp32 master, or the working parameters where they are the master. */
static float *update_param(ft_engine *e, engine_unit *eu, size_t lo)
{
    return (eu->master ? eu->master : (float *)eu->full + eu->opt_begin) + (lo - eu->opt_begin);
}

/* AdamW's arguments for unit elements [lo, hi), weight decay wd on [lo, split) only; one
 * launch for both ranges: no_decay_from 0 exempts none, so a range wholly past the split
 * takes weight_decay 0 instead. */
static ft_adamw_params adamw_params(const ft_engine *e, const ft_optimizer_config *o,
                                    uint16_t *bits, size_t lo, size_t split, size_t hi,
                                    double lr, double wd, float grad_mult, bool fresh)
{
    return (ft_adamw_params){ .lr = (float)lr, .beta1 = (float)o->beta1,
                              .beta2 = (float)o->beta2, .eps = (float)o->eps,
                              .weight_decay = split > lo ? (float)wd : 0.0f,
                              .no_decay_from = split > lo && split < hi ? split - lo : 0,
                              .step = e->step, .bf16_out = bits, .grad_scale = grad_mult,
                              .moments_zero = fresh };
}

/* Where weight decay ends in unit u's opt range: on the 2-D weights, which lead every
 * unit; none on norms. */
static size_t decay_split(const ft_engine *e, int u)
{
    const engine_unit *eu = &e->units[u];
    const size_t decay_end = e->layout.units[u].decay_numel;
    return decay_end < eu->opt_begin ? eu->opt_begin
           : decay_end > eu->opt_end ? eu->opt_end : decay_end;
}

/* Optimizer update of unit elements [lo, hi) (unit coordinates, within the opt range),
 * with weight decay wd on [lo, split) only (split in [lo, hi]); fresh: the moments have
 * never been written (backend.h, moments_zero); host_grad: the opt range's gradient on
 * the host (offload), else NULL. */
static void update_range(ft_engine *e, const ft_optimizer_config *o, engine_unit *eu, size_t lo,
                         size_t split, size_t hi, double lr, double wd, float grad_mult,
                         bool fresh, const float *host_grad)
{
    if (hi <= lo)
        return;
    ft_backend *be = e->opt_be;
    const size_t off = lo - eu->opt_begin;
    float *p = update_param(e, eu, lo);
    const float *g = (host_grad ? host_grad : ft_engine_opt_grads(eu)) + off;
    if (o->type == FT_OPT_ADAMW) {
        uint16_t *bits = ft_engine_update_bits(e, (int)(eu - e->units));
        ft_adamw_params ap = adamw_params(e, o, bits ? bits + off : NULL, lo, split, hi, lr, wd,
                                          grad_mult, fresh);
        be->ops->adamw_step(be, p, g, eu->m + off, eu->v + off, hi - lo, &ap);
    } else { /* SGD: the two ranges one after the other */
        const double part_wd[2] = { wd, 0.0 };
        const size_t from[2] = { lo, split }, to[2] = { split, hi };
        for (int r = 0; r < 2; r++) {
            if (to[r] <= from[r])
                continue;
            ft_sgd_params sp = { .lr = (float)lr, .momentum = (float)o->momentum,
                                 .weight_decay = (float)part_wd[r], .grad_scale = grad_mult,
                                 .moments_zero = fresh };
            be->ops->sgd_step(be, p + (from[r] - lo), g + (from[r] - lo),
                              eu->m + off + (from[r] - lo), to[r] - from[r], &sp);
        }
    }
}

/* The armed lookup's rows of the embedding (unit 0) ahead of its update, on the side lane
 * (engine_lookup.c), with the arguments unit 0's AdamW update will get. */
static void preview_lookup(ft_engine *e, const ft_optimizer_config *o, double lr,
                           float grad_mult, bool fresh)
{
    engine_unit *eu = &e->units[0];
    const ft_adamw_params ap = adamw_params(e, o, NULL, eu->opt_begin, decay_split(e, 0),
                                            eu->opt_end, lr, o->weight_decay, grad_mult, fresh);
    ft_engine_lookup_preview(e, update_param(e, eu, eu->opt_begin), ft_engine_opt_grads(eu), &ap);
}

/* The unit updated i-th: in order, or with the rows ahead unit 0 (the embedding) last. */
static int update_order(int i, int n_units, int ahead)
{
    return ahead ? (i + 1) % n_units : i;
}

int ft_engine_step(ft_engine *e, const ft_optimizer_config *o, double lr, double grad_mult,
                   ft_error *err)
{
    if (e->opt.frozen)
        return ft_engine_frozen_refuse(err, "optimizer step");
    ft_engine_settle_updates(e); /* the last step's updates and gathers (a step without a
                                    pass between: reduce and norm settled them otherwise) */
    e->step++;
    /* The multiplier reaches the update kernels (one read of the gradient, not a scaling
     * pass before them); the gradient buffers keep their unscaled values. */
    const float mult = (float)grad_mult;
    const int overlap = e->overlap; /* the updates run beside the next forward */
    /* The moments were allocated zero (engine.c) and nothing but this has written them */
    const bool fresh = !e->moments_written;
    e->moments_written = 1;
    const int n_units = e->layout.n_units;
    int ahead = 0; /* the next lookup's rows first, the embedding's update last */
    if (overlap) {
        /* the rows' upload on the main lane, before the fork */
        ahead = o->type == FT_OPT_ADAMW && ft_engine_lookup_arm(e);
        ft_engine_overlap_begin(e);
        if (ahead)
            preview_lookup(e, o, lr, mult, fresh);
    }
    const int offload = e->opt.offload_optimizer; /* turns on the host (engine_offload.c) */
    if (offload)
        ft_engine_offload_begin(e, update_order(0, n_units, ahead));
    for (int i = 0; i < n_units; i++) {
        const int u = update_order(i, n_units, ahead);
        engine_unit *eu = &e->units[u];
        const int next = i + 1 < n_units ? update_order(i + 1, n_units, ahead) : -1;
        const float *host_grad = offload ? ft_engine_offload_turn(e, next) : NULL;
        update_range(e, o, eu, eu->opt_begin, decay_split(e, u), eu->opt_end, lr,
                     o->weight_decay, mult, fresh, host_grad);
        /* No wait here: publishing is ordered after the update on the device's stream,
         * and the stages that hand a shared staging buffer to the transport wait there. */
        if ((o->type == FT_OPT_ADAMW ? ft_engine_publish_updated(e, u, err)
                                     : ft_engine_publish_params(e, u, err))) {
            if (overlap)
                ft_engine_overlap_end(e);
            ft_engine_offload_end(e);
            return -1;
        }
        if (overlap)
            ft_engine_overlap_unit_done(e, u);
    }
    if (overlap) { /* no wait: acquire and the settling points wait on the device */
        ft_engine_overlap_end(e);
        return 0;
    }
    ft_engine_offload_end(e);
    if (e->opt.zero_stage == 3)
        ft_engine_invalidate_gathered(e);
    /* No wait for the device either: what reads the state next (the next pass, through
     * acquire; downloads; collectives) is ordered after the update on the device, and a
     * host wait here would leave the GPU idle while the host starts the next step. With
     * offload the update ran on the host and its uploads are done. */
    return 0;
}
