#include "shard/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/weights.h"
#include "model/init.h"

typedef struct engine_unit {
    size_t numel;
    float *params; /* working parameters (fp32 values; bf16-representable when bf16) */
    float *grads;
    float *master; /* fp32 master when param_dtype is bf16, else NULL (params is the master) */
    float *m, *v;  /* AdamW moments, or the SGD momentum in m */
} engine_unit;

struct ft_engine {
    ft_model_layout layout;
    ft_backend *be;
    ft_comm *comm;
    ft_engine_options opt;
    engine_unit *units;
    uint16_t *bf16_scratch; /* [max unit numel] for rounding master -> params */
    size_t max_numel;
    long step;
    ft_engine_memory mem;
};

static float *alloc_counted(ft_engine *e, size_t n, size_t *counter)
{
    float *p = e->be->ops->alloc(e->be, n * sizeof(float));
    if (p)
        *counter += n * sizeof(float);
    return p;
}

int ft_engine_create(ft_engine **out, const ft_model_layout *layout, ft_backend *be,
                     ft_comm *comm, const ft_engine_options *opt, ft_error *err)
{
    *out = NULL;
    if (opt->zero_stage != 0)
        return ft_fail(err, "zero_stage %d: this build implements zero_stage = 0 (data "
                       "parallel) only", opt->zero_stage);
    ft_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ft_fail(err, "out of host memory");
    e->layout = *layout;
    e->be = be;
    e->comm = comm;
    e->opt = *opt;
    e->units = calloc((size_t)layout->n_units, sizeof *e->units);
    if (!e->units) {
        free(e);
        return ft_fail(err, "out of host memory");
    }
    int ok = 1;
    for (int u = 0; u < layout->n_units && ok; u++) {
        engine_unit *eu = &e->units[u];
        eu->numel = layout->units[u].numel;
        if (eu->numel > e->max_numel)
            e->max_numel = eu->numel;
        eu->params = alloc_counted(e, eu->numel, &e->mem.params);
        eu->grads = alloc_counted(e, eu->numel, &e->mem.grads);
        eu->m = alloc_counted(e, eu->numel, &e->mem.optimizer);
        if (opt->optimizer == FT_OPT_ADAMW)
            eu->v = alloc_counted(e, eu->numel, &e->mem.optimizer);
        if (opt->param_dtype == FT_DTYPE_BF16)
            eu->master = alloc_counted(e, eu->numel, &e->mem.optimizer);
        ok = eu->params && eu->grads && eu->m && (eu->v || opt->optimizer != FT_OPT_ADAMW) &&
             (eu->master || opt->param_dtype != FT_DTYPE_BF16);
    }
    if (ok && opt->param_dtype == FT_DTYPE_BF16) {
        e->bf16_scratch = be->ops->alloc(be, e->max_numel * sizeof(uint16_t));
        e->mem.scratch += e->max_numel * sizeof(uint16_t);
        ok = e->bf16_scratch != NULL;
    }
    if (!ok) {
        size_t total = e->mem.params + e->mem.grads + e->mem.optimizer;
        ft_engine_free(e);
        return ft_fail(err, "cannot allocate model state on the %s backend (%zu MiB allocated "
                       "before failing); use more ranks with a higher zero_stage",
                       be->name, total >> 20);
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
        for (int u = 0; u < e->layout.n_units; u++) {
            engine_unit *eu = &e->units[u];
            be->ops->free(be, eu->params);
            be->ops->free(be, eu->grads);
            be->ops->free(be, eu->master);
            be->ops->free(be, eu->m);
            be->ops->free(be, eu->v);
        }
    be->ops->free(be, e->bf16_scratch);
    free(e->units);
    free(e);
}

/* Working parameters = bf16 rounding of the master (bf16 mode only). */
static void refresh_working_params(ft_engine *e, int u)
{
    engine_unit *eu = &e->units[u];
    if (!eu->master)
        return;
    e->be->ops->f32_to_bf16(e->be, e->bf16_scratch, eu->master, eu->numel);
    e->be->ops->bf16_to_f32(e->be, eu->params, e->bf16_scratch, eu->numel);
}

/* Uploads host values as the unit's parameters (and master). */
static void set_unit_params(ft_engine *e, int u, const float *host)
{
    engine_unit *eu = &e->units[u];
    float *dst = eu->master ? eu->master : eu->params;
    e->be->ops->upload(e->be, dst, host, eu->numel * sizeof(float));
    refresh_working_params(e, u);
}

int ft_engine_init_random(ft_engine *e, uint64_t seed, double std, ft_error *err)
{
    float *host = malloc(e->max_numel * sizeof(float));
    if (!host)
        return ft_fail(err, "out of host memory");
    for (int u = 0; u < e->layout.n_units; u++) {
        ft_model_init_range(&e->layout.units[u], 0, e->units[u].numel, seed, std, host);
        set_unit_params(e, u, host);
    }
    e->be->ops->sync(e->be);
    free(host);
    return 0;
}

int ft_engine_load(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err)
{
    float *host = malloc(e->max_numel * sizeof(float));
    if (!host)
        return ft_fail(err, "out of host memory");
    int rc = 0;
    for (int u = 0; u < e->layout.n_units && !rc; u++) {
        rc = ft_weights_read_range(f, group, &e->layout.units[u], 0, e->units[u].numel, host, err);
        if (!rc)
            set_unit_params(e, u, host);
    }
    e->be->ops->sync(e->be);
    free(host);
    return rc;
}

int ft_engine_save(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err)
{
    float *host = malloc(e->max_numel * sizeof(float));
    if (!host)
        return ft_fail(err, "out of host memory");
    int rc = 0;
    /* Replicated state: rank 0 writes, the others join the collective with nothing. */
    const int writer = e->comm->rank == 0;
    for (int u = 0; u < e->layout.n_units && !rc; u++) {
        const engine_unit *eu = &e->units[u];
        size_t n = writer ? eu->numel : 0;
        if (writer)
            e->be->ops->download(e->be, host, eu->master ? eu->master : eu->params,
                                 n * sizeof(float));
        rc = ft_weights_write_range(f, group, &e->layout.units[u], 0, n, host, err);
    }
    free(host);
    return rc;
}

/* ---------------------------------------------------------------- param source */

static const float *src_acquire(void *ctx, int unit)
{
    return ((ft_engine *)ctx)->units[unit].params;
}

static float *src_grads(void *ctx, int unit) { return ((ft_engine *)ctx)->units[unit].grads; }
static void src_release(void *ctx, int unit) { (void)ctx; (void)unit; }
static void src_grad_done(void *ctx, int unit) { (void)ctx; (void)unit; }

ft_param_source ft_engine_param_source(ft_engine *e)
{
    return (ft_param_source){ .ctx = e, .acquire = src_acquire, .grads = src_grads,
                              .release = src_release, .grad_done = src_grad_done };
}

/* ---------------------------------------------------------------- gradients */

void ft_engine_zero_grads(ft_engine *e)
{
    for (int u = 0; u < e->layout.n_units; u++)
        e->be->ops->zero(e->be, e->units[u].grads, e->units[u].numel * sizeof(float));
}

int ft_engine_reduce_grads(ft_engine *e, ft_error *err)
{
    if (e->comm->size == 1)
        return 0;
    e->be->ops->sync(e->be);
    /* Issue every unit's all-reduce, then wait: the transport may pipeline them. */
    const int n = e->layout.n_units;
    ft_comm_request **reqs = calloc((size_t)n, sizeof *reqs);
    if (!reqs)
        return ft_fail(err, "out of host memory");
    int rc = 0;
    for (int u = 0; u < n && !rc; u++)
        if (e->comm->ops->all_reduce_f32(e->comm, e->units[u].grads, e->units[u].numel, &reqs[u]))
            rc = ft_fail(err, "gradient all-reduce of unit %d could not start", u);
    for (int u = 0; u < n; u++)
        if (reqs[u] && ft_comm_wait(e->comm, reqs[u], rc ? NULL : err))
            rc = -1;
    free(reqs);
    return rc;
}

int ft_engine_grad_norm(ft_engine *e, double *norm, ft_error *err)
{
    double sq = 0.0;
    for (int u = 0; u < e->layout.n_units; u++)
        sq += e->be->ops->sum_squares(e->be, e->units[u].grads, e->units[u].numel);
    /* Gradients are replicated after the all-reduce: the local sum is the global one. */
    *norm = sqrt(sq);
    (void)err;
    return 0;
}

/* ---------------------------------------------------------------- optimizer */

static void update_range(ft_engine *e, const ft_optimizer_config *o, engine_unit *eu, size_t lo,
                         size_t hi, double lr, double wd)
{
    if (hi <= lo)
        return;
    ft_backend *be = e->be;
    float *p = (eu->master ? eu->master : eu->params) + lo;
    if (o->type == FT_OPT_ADAMW) {
        ft_adamw_params ap = { .lr = (float)lr, .beta1 = (float)o->beta1,
                               .beta2 = (float)o->beta2, .eps = (float)o->eps,
                               .weight_decay = (float)wd, .step = e->step };
        be->ops->adamw_step(be, p, eu->grads + lo, eu->m + lo, eu->v + lo, hi - lo, &ap);
    } else {
        ft_sgd_params sp = { .lr = (float)lr, .momentum = (float)o->momentum,
                             .weight_decay = (float)wd };
        be->ops->sgd_step(be, p, eu->grads + lo, eu->m + lo, hi - lo, &sp);
    }
}

int ft_engine_step(ft_engine *e, const ft_optimizer_config *o, double lr, double grad_mult,
                   ft_error *err)
{
    (void)err;
    e->step++;
    for (int u = 0; u < e->layout.n_units; u++) {
        engine_unit *eu = &e->units[u];
        if (grad_mult != 1.0)
            e->be->ops->scale(e->be, eu->grads, (float)grad_mult, eu->numel);
        /* Weight decay on the 2-D weights, which lead every unit; none on norms. */
        const size_t decay_end = e->layout.units[u].decay_numel;
        update_range(e, o, eu, 0, decay_end, lr, o->weight_decay);
        update_range(e, o, eu, decay_end, eu->numel, lr, 0.0);
        refresh_working_params(e, u);
    }
    e->be->ops->sync(e->be);
    return 0;
}

long ft_engine_step_count(const ft_engine *e) { return e->step; }
ft_engine_memory ft_engine_memory_usage(const ft_engine *e) { return e->mem; }

void ft_engine_download_params(ft_engine *e, int unit, float *host)
{
    e->be->ops->download(e->be, host, e->units[unit].params, e->units[unit].numel * sizeof(float));
}

void ft_engine_download_grads(ft_engine *e, int unit, float *host)
{
    e->be->ops->download(e->be, host, e->units[unit].grads, e->units[unit].numel * sizeof(float));
}
