/* Parameters in and out of the engine: random init, load, save, and publishing the
 * optimizer's result as working parameters. Every path moves only this rank's slice
 * through host memory and files; full units are assembled with all-gathers. */
#include <stdlib.h>
#include <string.h>

#include "comm/world.h"
#include "io/weights.h"
#include "model/init.h"
#include "shard/engine_internal.h"
#include "util/bf16.h"

static int wait_ok(ft_engine *e, ft_comm_request *req, int started, const char *what,
                   ft_error *err)
{
    if (started)
        return ft_fail(err, "%s: could not start the collective", what);
    return ft_comm_wait(e->comm, req, err);
}

/* full[n_pad] = concatenation of every rank's shard[S] (fp32). */
int ft_engine_gather_f32(ft_engine *e, float *full, const float *shard, size_t S, ft_error *err)
{
    ft_comm_request *req = NULL;
    int rc = e->comm->ops->all_gather(e->comm, full, shard, S * sizeof(float), &req);
    return wait_ok(e, req, rc, "parameter all-gather", err);
}

/* full[n_pad] = bf16 gather of every rank's bits[S], expanded to fp32. */
static int gather_bf16(ft_engine *e, float *full, const uint16_t *bits, size_t S, ft_error *err)
{
    ft_comm_request *req = NULL;
    int rc = e->comm->ops->all_gather(e->comm, e->gather_bits, bits, S * sizeof(uint16_t), &req);
    if (wait_ok(e, req, rc, "parameter all-gather", err))
        return -1;
    e->be->ops->bf16_to_f32(e->be, full, e->gather_bits, S * (size_t)e->size);
    return 0;
}

/* full[n_pad] bits = every rank's bits[S] (the model takes bits). */
static int gather_bits(ft_engine *e, uint16_t *full, const uint16_t *bits, size_t S,
                       ft_error *err)
{
    ft_comm_request *req = NULL;
    int rc = e->comm->ops->all_gather(e->comm, full, bits, S * sizeof(uint16_t), &req);
    return wait_ok(e, req, rc, "parameter all-gather", err);
}

int ft_engine_gather_bits_into(ft_engine *e, void *full, const uint16_t *bits, size_t S,
                               ft_error *err)
{
    return ft_engine_hands_bits(e) ? gather_bits(e, full, bits, S, err)
                                   : gather_bf16(e, full, bits, S, err);
}

int ft_engine_start_bits_gather(ft_engine *e, int unit, uint16_t *dst, ft_comm_request **req)
{
    const engine_unit *eu = &e->units[unit];
    const size_t S = eu->shard;
    if (eu->shard_bf16)
        return e->comm->ops->all_gather(e->comm, dst, eu->shard_bf16, S * sizeof(uint16_t), req);
    uint16_t *own = dst + (size_t)e->rank * S;
    e->be->ops->f32_to_bf16(e->be, own, eu->master, S);
    return e->comm->ops->all_gather(e->comm, dst, own, S * sizeof(uint16_t), req);
}

uint16_t *ft_engine_update_bits(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!e->opt.precision.has_master)
        return NULL;
    if (e->opt.offload_optimizer) /* the host's, in opt coordinates (publish uploads them) */
        return ft_engine_offload_bits(e);
    switch (e->opt.zero_stage) {
    case 0: /* the whole unit: full's bits, or the bits widened into full */
        return ft_engine_hands_bits(e) ? (uint16_t *)eu->full : e->gather_bits;
    case 1:
    case 2: /* deferred gathers: in place, the unit's own slice of its working bits */
        return e->gather_overlap ? (uint16_t *)eu->full + eu->opt_begin : e->stage_bits;
    default:
        return eu->shard_bf16;
    }
}

/* bits_ready: the optimizer wrote ft_engine_update_bits(e, unit) already. */
static int publish(ft_engine *e, int unit, int bits_ready, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    const int bf16 = e->opt.precision.has_master, bits = ft_engine_hands_bits(e);
    if (e->opt.offload_optimizer) /* the update ran on the host (engine_offload.c) */
        return ft_engine_offload_publish(e, unit, bits_ready, err);
    const float *master = eu->master; /* on the device */
    switch (e->opt.zero_stage) {
    case 0: /* fp32: the optimizer updated full in place */
        if (bits) {
            if (!bits_ready)
                be->ops->f32_to_bf16(be, eu->full, master, eu->numel);
        } else if (bf16) {
            if (!bits_ready)
                be->ops->f32_to_bf16(be, e->gather_bits, master, eu->numel);
            be->ops->bf16_to_f32(be, eu->full, e->gather_bits, eu->numel);
        }
        return 0;
    case 1:
    case 2:
        if (!bf16)
            return ft_engine_gather_f32(e, eu->full, master, eu->shard, err);
        if (bits_ready && e->gather_overlap) /* the bits are in place: gather, no wait */
            return ft_engine_start_deferred_gather(e, unit, err);
        if (!bits_ready) {
            be->ops->f32_to_bf16(be, e->stage_bits, master, eu->shard);
        } else { /* the update wrote the opt range; the padding after it (last rank)
                    must not carry another unit's bits from this shared buffer */
            const size_t len = eu->opt_end - eu->opt_begin;
            be->ops->f32_to_bf16(be, e->stage_bits + len, master + len, eu->shard - len);
        }
        be->ops->sync(be);
        return ft_engine_gather_bits_into(e, eu->full, e->stage_bits, eu->shard, err);
    default: /* stage 3: gathers read these bits, or the fp32 master itself */
        if (eu->shard_bf16 && !bits_ready)
            be->ops->f32_to_bf16(be, eu->shard_bf16, master, eu->shard);
        return 0;
    }
}

int ft_engine_publish_params(ft_engine *e, int unit, ft_error *err)
{
    return publish(e, unit, 0, err);
}

int ft_engine_publish_updated(ft_engine *e, int unit, ft_error *err)
{
    return publish(e, unit, ft_engine_update_bits(e, unit) != NULL, err);
}

/* Stage 0: the fp32 unit on the backend that loading completes, padded ([n_pad]): the
 * master where the model takes bf16 bits (full holds only bits; with offload the
 * device's copy of the master), else the working parameters. */
static float *stage0_unit(ft_engine *e, engine_unit *eu)
{
    if (ft_engine_hands_bits(e))
        return e->opt.offload_optimizer ? e->dev_master : eu->master;
    return (float *)eu->full;
}

/* ... and this rank's slice of it, where its values land: the all-gather completes the
 * unit in place, with no staging buffer (one the size of the largest unit's slice, 1 GiB
 * for the 1B shape's embedding, held for the whole run). */
static float *stage0_own_slice(ft_engine *e, engine_unit *eu)
{
    return stage0_unit(e, eu) + (size_t)e->rank * eu->shard;
}

/* Takes this rank's slice of unit u's initial values (host, [S], zero-padded) and
 * makes them the engine's state on every stage. host may be the master itself
 * (slice_target), or NULL where fill_through_pieces already put the slice into the
 * device buffer this would upload it to. */
static int adopt_own_slice(ft_engine *e, int u, const float *host, ft_error *err)
{
    engine_unit *eu = &e->units[u];
    ft_backend *be = e->be;
    if (e->opt.zero_stage == 0) {
        float *unit = stage0_unit(e, eu), *own = stage0_own_slice(e, eu);
        if (host && host != own) /* slice_target may have put it there */
            be->ops->upload(be, own, host, eu->shard * sizeof(float));
        be->ops->sync(be);
        if (e->size > 1 && ft_engine_gather_f32(e, unit, own, eu->shard, err)) /* in place */
            return -1;
        /* a master that is not the unit itself takes its values: in host memory with
         * offload, else on the device beside fp32 working parameters */
        if (eu->master && eu->master != unit && e->opt.offload_optimizer)
            be->ops->download(be, eu->master, unit, eu->numel * sizeof(float));
        else if (eu->master && eu->master != unit)
            be->ops->copy(be, eu->master, unit, eu->numel * sizeof(float));
    } else if (host && host != eu->master) {
        e->opt_be->ops->upload(e->opt_be, eu->master, host, eu->shard * sizeof(float));
    }
    return ft_engine_publish_params(e, u, err);
}

typedef int (*slice_source)(ft_engine *e, int u, size_t begin, size_t end, float *dst,
                            void *ctx, ft_error *err);

/* Where unit u's own slice is assembled: the fp32 master shard itself when it lives
 * in host memory (no staging copy); at stage 0 on a host backend, its place in the unit
 * the all-gather completes (a 1 GiB embedding would otherwise be written two or three
 * times and each buffer's pages faulted in: on a VM where a first touch costs ~2 s a
 * GiB, most of a 384 M model's start-up); else the host buffer. */
static float *slice_target(ft_engine *e, engine_unit *eu, float *host)
{
    if (e->opt.frozen)
        return ft_engine_frozen_slice_target(e, eu, host);
    if (e->opt.zero_stage > 0 && eu->master && e->opt_be->device < 0)
        return eu->master;
    if (e->opt.zero_stage == 0 && e->be->device < 0)
        return stage0_own_slice(e, eu);
    return host;
}

/* Elements of one piece where a unit's slice reaches a device through host memory: the
 * host buffer is this size rather than the largest shard's. On an H200's host (a VM),
 * first touches of a 1 GiB buffer (2 GiB for an 8B model's embedding), all threads
 * faulting pages at once, took most of a 5.8 s (12.4 s) initialisation. The test hook
 * FTMPI_FILL_PIECE=<elements> makes pieces small enough for test models to need many. */
#define FILL_PIECE ((size_t)4 << 20) /* 16 MiB of fp32 */

static size_t fill_piece(void)
{
    const char *hook = getenv("FTMPI_FILL_PIECE");
    const long n = hook ? atol(hook) : 0;
    return n > 0 ? (size_t)n : FILL_PIECE;
}

/* Unit u's slice [b, end) from src into landing (device memory of backend be), a piece
 * at a time through host[piece]; the padding up to the shard size zeroed there. The
 * values are pure functions of their index, so pieces give the bits of one whole slice. */
static int fill_through_pieces(ft_engine *e, int u, size_t b, size_t end, slice_source src,
                               void *ctx, float *host, size_t piece, ft_backend *be,
                               float *landing, double *values_s, ft_error *err)
{
    engine_unit *eu = &e->units[u];
    for (size_t p = b; p < end; p += piece) {
        const size_t n = end - p < piece ? end - p : piece;
        const double v0 = ft_world_seconds();
        if (src(e, u, p, p + n, host, ctx, err))
            return -1;
        *values_s += ft_world_seconds() - v0;
        be->ops->upload(be, landing + (p - b), host, n * sizeof(float));
    }
    be->ops->zero(be, landing + (end - b), (eu->shard - (end - b)) * sizeof(float));
    return 0;
}

/* A source that writes unit u's slice [b, end) itself into landing, memory of backend
 * be, with host[0 .. host_n) to stage what it makes on the host (the random values: a
 * device makes them where they are kept). */
typedef int (*slice_device_source)(ft_engine *e, int u, size_t b, size_t end, ft_backend *be,
                                   float *landing, float *host, size_t host_n, void *ctx,
                                   ft_error *err);

/* fill_through_pieces for a source that writes device memory itself */
static int fill_on_device(ft_engine *e, int u, size_t b, size_t end, slice_device_source dev,
                          void *ctx, float *host, size_t piece, ft_backend *be, float *landing,
                          double *values_s, ft_error *err)
{
    const double v0 = ft_world_seconds();
    if (dev(e, u, b, end, be, landing, host, piece, ctx, err))
        return -1;
    *values_s += ft_world_seconds() - v0;
    be->ops->zero(be, landing + (end - b), (e->units[u].shard - (end - b)) * sizeof(float));
    return 0;
}

/* Every unit's own slice from src (or, landing in device memory, from dev when the
 * source has one), then published. */
static int fill_from(ft_engine *e, slice_source src, slice_device_source dev, void *ctx,
                     ft_error *err)
{
    ft_engine_settle_updates(e); /* no update may still write what this replaces */
    ft_engine_lookup_disarm(e);  /* nor the next lookup's rows be read from it */
    /* malloc'd, not touched: only the paths that stage through it fault its pages in */
    const size_t piece = fill_piece();
    const size_t host_n = e->max_shard < piece ? e->max_shard : piece;
    float *host = malloc((host_n ? host_n : 1) * sizeof(float));
    if (!host)
        return ft_fail(err, "out of host memory");
    int rc = 0;
    double values_s = 0.0, t0 = ft_world_seconds();
    if (e->opt.frozen) { /* a gathered unit would keep its old values */
        ft_engine_invalidate_gathered(e);
        rc = ft_engine_frozen_begin_fill(e, err);
    }
    for (int u = 0; u < e->layout.n_units && !rc; u++) {
        engine_unit *eu = &e->units[u];
        size_t b, end;
        ft_engine_own_range(e, eu, &b, &end);
        float *dst = slice_target(e, eu, host);
        if (dst == host) {
            /* a device's: a piece at a time into the device buffer the slice would be
             * uploaded to (frozen: its staging; stage 0: its place in the unit; else the
             * master) */
            const bool to_stage = e->opt.frozen || e->opt.zero_stage == 0;
            ft_backend *to = to_stage ? e->be : e->opt_be;
            float *landing = e->opt.frozen              ? ft_engine_frozen_landing(e, eu)
                             : e->opt.zero_stage == 0 ? stage0_own_slice(e, eu)
                                                      : eu->master;
            rc = (dev ? fill_on_device(e, u, b, end, dev, ctx, host, host_n, to, landing,
                                       &values_s, err)
                      : fill_through_pieces(e, u, b, end, src, ctx, host, host_n, to, landing,
                                            &values_s, err)) ||
                 (e->opt.frozen ? ft_engine_frozen_adopt(e, u, landing, err)
                                : adopt_own_slice(e, u, NULL, err));
            continue;
        }
        /* src fills [0, end-b); the padding up to the shard size is zero */
        memset(dst + (end - b), 0, (eu->shard - (end - b)) * sizeof(float));
        const double v0 = ft_world_seconds();
        rc = src(e, u, b, end, dst, ctx, err);
        values_s += ft_world_seconds() - v0;
        rc = rc || (e->opt.frozen ? ft_engine_frozen_adopt(e, u, dst, err)
                                  : adopt_own_slice(e, u, dst, err));
    }
    e->be->ops->sync(e->be);
    e->fill_values_s = values_s;
    e->fill_placing_s = ft_world_seconds() - t0 - values_s;
    if (e->opt.frozen) /* the load staging is not needed until another fill */
        ft_engine_frozen_end_fill(e);
    free(host);
    return rc ? -1 : 0;
}

typedef struct random_ctx {
    uint64_t seed;
    double std;
} random_ctx;

static int random_slice(ft_engine *e, int u, size_t b, size_t end, float *dst, void *ctx,
                        ft_error *err)
{
    const random_ctx *r = ctx;
    (void)err;
    ft_model_init_range(&e->layout.units[u], b, end, r->seed, r->std, dst);
    return 0;
}

static int random_slice_on(ft_engine *e, int u, size_t b, size_t end, ft_backend *be,
                           float *landing, float *host, size_t host_n, void *ctx, ft_error *err)
{
    const random_ctx *r = ctx;
    (void)err;
    ft_model_init_range_on(be, &e->layout.units[u], b, end, r->seed, r->std, landing, host,
                           host_n);
    return 0;
}

void ft_engine_fill_seconds(const ft_engine *e, double *values, double *placing)
{
    *values = e->fill_values_s;
    *placing = e->fill_placing_s;
}

int ft_engine_init_random(ft_engine *e, uint64_t seed, double std, ft_error *err)
{
    random_ctx r = { seed, std };
    return fill_from(e, random_slice, random_slice_on, &r, err);
}

typedef struct fill_ctx {
    ft_engine_fill_fn fill;
    void *ctx;
} fill_ctx;

static int caller_slice(ft_engine *e, int u, size_t b, size_t end, float *dst, void *ctx,
                        ft_error *err)
{
    const fill_ctx *f = ctx;
    return f->fill(f->ctx, &e->layout.units[u], b, end, dst, err);
}

int ft_engine_init_from(ft_engine *e, ft_engine_fill_fn fill, void *ctx, ft_error *err)
{
    fill_ctx f = { fill, ctx };
    return fill_from(e, caller_slice, NULL, &f, err);
}

typedef struct file_ctx {
    const ft_h5file *f;
    const char *group;
    uint64_t *hashes;
} file_ctx;

/* Announces unit u's own slice to the file's read-ahead (ft_weights_will_read).
 * whole: the unit's full range (stage 0 moments). */
static void announce_unit(ft_engine *e, const ft_h5file *f, const char *group, int u, bool whole)
{
    if (u >= e->layout.n_units)
        return;
    size_t b, end;
    ft_engine_own_range(e, &e->units[u], &b, &end);
    if (whole)
        b = 0, end = e->units[u].numel;
    ft_weights_will_read(f, group, &e->layout.units[u], b, end);
}

/* Called before reading unit u (in order 0, 1, ...): keeps the announcements one unit
 * ahead of the reads, so that the disk keeps going while a unit is hashed and adopted. */
static void announce_ahead_of(ft_engine *e, const ft_h5file *f, const char *group, int u,
                              bool whole)
{
    if (u == 0)
        announce_unit(e, f, group, 0, whole);
    announce_unit(e, f, group, u + 1, whole);
}

static int file_slice(ft_engine *e, int u, size_t b, size_t end, float *dst, void *ctx,
                      ft_error *err)
{
    const file_ctx *fc = ctx;
    announce_ahead_of(e, fc->f, fc->group, u, false);
    return ft_weights_read_range_hashed(fc->f, fc->group, &e->layout.units[u], b, end, dst,
                                        fc->hashes ? fc->hashes + e->layout.units[u].first_tensor : NULL,
                                        err);
}

int ft_engine_load(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err)
{
    file_ctx fc = { f, group, NULL };
    return fill_from(e, file_slice, NULL, &fc, err);
}

/* ---------------------------------------------------------------- checkpoint state */

bool ft_engine_has_field(const ft_engine *e, ft_state_field field)
{
    if (e->opt.frozen)
        return field == FT_STATE_PARAMS;
    switch (field) {
    case FT_STATE_MASTER: return e->opt.precision.has_master;
    case FT_STATE_V: return e->opt.optimizer == FT_OPT_ADAMW;
    default: return true;
    }
}

void ft_engine_set_step_count(ft_engine *e, long step) { e->step = step; }

/* Buffer holding field over the unit's optimizer range, and the offset of element b
 * in it (stage 0 buffers span the unit, the others the own slice). */
static float *moment_buffer(ft_engine *e, engine_unit *eu, ft_state_field field, size_t b,
                            size_t *off)
{
    *off = e->opt.zero_stage == 0 ? b : 0;
    return field == FT_STATE_M ? eu->m : eu->v;
}

/* src[0, n) of backend be as host memory: src itself when be's memory is the host's
 * (the CPU backend: no copy), else downloaded into host. */
static const float *host_view(ft_backend *be, float *host, const float *src, size_t n)
{
    if (be->device < 0)
        return src;
    be->ops->download(be, host, src, n * sizeof(float));
    return host;
}

/* This rank's values of field over its slice [b, end) of unit u, as host memory:
 * engine memory itself where that is host fp32, else converted or downloaded into
 * host[0, end-b). NULL when out of memory. */
static const float *own_field_values(ft_engine *e, int u, ft_state_field field, size_t b,
                                     size_t end, float *host)
{
    engine_unit *eu = &e->units[u];
    const size_t n = end - b;
    if (e->opt.frozen)
        return ft_engine_frozen_values(e, u, b, end, host);
    /* With bits the working parameters are the master's bf16 rounding, which the file
     * writer makes itself (the same rounding): hand it the master. */
    if (field == FT_STATE_MASTER ||
        (field == FT_STATE_PARAMS && (ft_engine_hands_bits(e) || (!eu->full && !eu->shard_bf16)))) {
        const size_t off = e->opt.zero_stage == 0 ? b : 0;
        return eu->master ? host_view(e->opt_be, host, eu->master + off, n)
                          : host_view(e->be, host, (float *)eu->full + off, n);
    }
    if (field == FT_STATE_PARAMS && eu->full)
        return host_view(e->be, host, (float *)eu->full + b, n);
    if (field == FT_STATE_PARAMS) { /* stage 3, bf16 shard: expand on the host */
        uint16_t *bits = malloc(n * sizeof *bits + 2);
        if (!bits)
            return NULL;
        e->be->ops->download(e->be, bits, eu->shard_bf16, n * sizeof(uint16_t));
        for (size_t i = 0; i < n; i++)
            host[i] = ft_bf16_to_f32(bits[i]);
        free(bits);
        return host;
    }
    size_t off;
    const float *src = moment_buffer(e, eu, field, b, &off);
    return host_view(e->opt_be, host, src + off, n);
}

int ft_engine_write_field(ft_engine *e, const ft_h5file *f, const char *group,
                          ft_state_field field, uint64_t *hashes, ft_error *err)
{
    if (e->opt.frozen && field != FT_STATE_PARAMS)
        return ft_engine_frozen_refuse(err, "writing the master or optimizer state");
    ft_engine_settle_updates(e);
    /* malloc'd, not touched: only the paths that copy fault its pages in */
    float *host = malloc(e->max_shard * sizeof(float) + 16);
    if (!host)
        return ft_fail(err, "out of host memory");
    /* on past a failed unit, so that every rank makes the same collective calls (see
     * transfer_range in io/weights.c); the first error is the one reported */
    int rc = 0;
    for (int u = 0; u < e->layout.n_units; u++) {
        size_t b, end;
        ft_error later;
        ft_error *e_u = rc ? &later : err;
        ft_engine_own_range(e, &e->units[u], &b, &end);
        const float *vals = own_field_values(e, u, field, b, end, host);
        if (!vals ? ft_fail(e_u, "out of host memory")
                  : ft_weights_write_range_hashed(f, group, &e->layout.units[u], b, end, vals,
                                                  hashes ? hashes + e->layout.units[u].first_tensor
                                                         : NULL,
                                                  e_u))
            rc = -1;
    }
    free(host);
    return rc;
}

int ft_engine_read_field(ft_engine *e, const ft_h5file *f, const char *group,
                         ft_state_field field, uint64_t *hashes, ft_error *err)
{
    if (e->opt.frozen && field != FT_STATE_PARAMS)
        return ft_engine_frozen_refuse(err, "reading the master or optimizer state");
    ft_engine_settle_updates(e);
    ft_engine_lookup_disarm(e); /* the state the next lookup's rows came from changes */
    if (field == FT_STATE_PARAMS || field == FT_STATE_MASTER) {
        file_ctx fc = { f, group, hashes };
        return fill_from(e, file_slice, NULL, &fc, err);
    }
    e->moments_written = 1; /* they hold the file's values now, whatever the read does */
    /* stage 0 reads whole units (replicated state), the others their slice; straight
     * into the moment buffer when it is host memory */
    const size_t cap = e->opt.zero_stage == 0 ? e->max_padded : e->max_shard;
    float *host = malloc(cap * sizeof(float)); /* untouched unless staged through */
    if (!host)
        return ft_fail(err, "out of host memory");
    const bool in_place = e->opt_be->device < 0;
    int rc = 0;
    for (int u = 0; u < e->layout.n_units && !rc; u++) {
        engine_unit *eu = &e->units[u];
        const ft_unit_layout *ul = &e->layout.units[u];
        uint64_t *hh = hashes ? hashes + ul->first_tensor : NULL;
        size_t b, end, off;
        ft_engine_own_range(e, eu, &b, &end);
        float *mb = moment_buffer(e, eu, field, e->opt.zero_stage == 0 ? 0 : b, &off) + off;
        float *dst = in_place ? mb : host;
        announce_ahead_of(e, f, group, u, e->opt.zero_stage == 0);
        /* Stage 0 replicates the optimizer state: every rank reads all of it, but only
         * its own slice counts toward the (all-reduced) content hash. */
        if (e->opt.zero_stage == 0) {
            rc = ft_weights_read_range(f, group, ul, 0, b, dst, err) ||
                 ft_weights_read_range_hashed(f, group, ul, b, end, dst + b, hh, err) ||
                 ft_weights_read_range(f, group, ul, end, eu->numel, dst + end, err);
            if (!rc && !in_place)
                e->opt_be->ops->upload(e->opt_be, mb, host, eu->numel * sizeof(float));
            continue;
        }
        rc = ft_weights_read_range_hashed(f, group, ul, b, end, dst, hh, err);
        if (!rc && !in_place)
            e->opt_be->ops->upload(e->opt_be, mb, host, (end - b) * sizeof(float));
    }
    free(host);
    return rc;
}

int ft_engine_save(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err)
{
    return ft_engine_write_field(e, f, group, e->opt.frozen ? FT_STATE_PARAMS : FT_STATE_MASTER,
                                 NULL, err);
}

/* download_params when the model takes bits: the resident bits, or a gather of them
 * into a temporary, widened on the host. */
static int download_bits(ft_engine *e, int unit, float *host, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    uint16_t *tmp = eu->full ? NULL : be->ops->alloc(be, eu->padded * sizeof(uint16_t));
    uint16_t *bits = malloc(eu->numel * sizeof(uint16_t) + 2);
    int rc = 0;
    if (!bits || (!eu->full && !tmp)) {
        rc = ft_fail(err, "out of memory gathering unit %d", unit);
    } else if (tmp) {
        ft_comm_request *req = NULL;
        int started = ft_engine_start_bits_gather(e, unit, tmp, &req);
        rc = wait_ok(e, req, started, "parameter all-gather", err);
    }
    if (!rc) {
        be->ops->download(be, bits, tmp ? tmp : eu->full, eu->numel * sizeof(uint16_t));
        for (size_t i = 0; i < eu->numel; i++)
            host[i] = ft_bf16_to_f32(bits[i]);
    }
    free(bits);
    be->ops->free(be, tmp);
    return rc;
}

int ft_engine_download_params(ft_engine *e, int unit, float *host, ft_error *err)
{
    ft_engine_settle_updates(e);
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    /* a frozen stage-3 bf16 shard is gathered as bits, whatever the model takes */
    if (ft_engine_hands_bits(e) || (e->opt.frozen && eu->shard_bf16))
        return download_bits(e, unit, host, err);
    if (eu->full) {
        be->ops->download(be, host, eu->full, eu->numel * sizeof(float));
        return 0;
    }
    /* stage 3: assemble the unit in a gather-sized temporary */
    float *tmp = be->ops->alloc(be, eu->padded * sizeof(float));
    if (!tmp)
        return ft_fail(err, "out of memory gathering unit %d", unit);
    int rc = e->opt.precision.has_master
                 ? gather_bf16(e, tmp, eu->shard_bf16, eu->shard, err)
                 : ft_engine_gather_f32(e, tmp, eu->dev_shard ? eu->dev_shard : eu->master, eu->shard, err);
    if (!rc)
        be->ops->download(be, host, tmp, eu->numel * sizeof(float));
    be->ops->free(be, tmp);
    return rc;
}

void ft_engine_download_grads(ft_engine *e, int unit, float *host)
{
    ft_engine_settle_updates(e);
    engine_unit *eu = &e->units[unit];
    if (!eu->grad_full)
        return;
    ft_engine_settle_grad(e, unit, eu->grad_full, sizeof(float), &eu->grad_unset);
    e->be->ops->download(e->be, host, eu->grad_full, eu->numel * sizeof(float));
}
