/* The frozen engine (ft_engine_options.frozen): the base model of a LoRA run, whose
 * parameters are used but never trained. It keeps the working parameters only, in the
 * storage a trainable engine of the same options hands out, so the model cannot tell
 * the two apart:
 *   stages 0-2: the full unit on every rank, bf16 bits when the model takes bits
 *               (precision.weights bf16), else fp32 values (bf16-rounded values with
 *               precision.params bf16);
 *   stage 3:    the rank's shard [S], bf16 bits with precision.params bf16 (widened at
 *               gather when the model takes fp32), else fp32; gathered around use by
 *               engine_source.c's pool as for a trainable engine.
 * No gradient, master, moment or offload buffer exists.
 *
 * Loading and random initialisation go through engine_params.c's fill_from: each rank
 * assembles its own fp32 slice [S] of one unit at a time, in place on a host backend, on
 * a device a 16 MiB piece at a time through host memory into device_slice
 * (ft_engine_frozen_landing), and this file makes it working storage. Where
 * the values are rounded to bf16 (precision.params bf16) the slice is staged on the
 * device in stage_f32 (4 x max_shard bytes, counted as scratch) and rounded from there
 * with the backend's f32_to_bf16, the op a trainable engine publishes with; fp32
 * values rounded for an fp32 model (stages 0-2) also pass through stage_bits (2 x
 * max_shard bytes). Without rounding the slice goes straight to its place. Stages 0-2
 * then all-gather the unit in place. So no fp32 copy of a unit exists beyond one
 * shard, and the values are bitwise those of a trainable engine after the same load:
 * the same rounding op on the same fp32 values.
 *
 * The staging is needed only while a load fills the units, yet it is the size of the
 * largest unit's shard in fp32 (0.4 GiB a rank for Llama 2 70B on 8 ranks): it is
 * released when the load or initialisation ends, and allocated again should another
 * fill come. It is allocated with the engine, so the planner counts it: the base loads
 * after the trainer has created the adapters' engine and the model, so the load is
 * where every buffer and the staging coexist, and the run's peak includes it. Freed,
 * it is headroom for what the plan does not count (the backend's own workspaces,
 * NCCL's buffers). */
#include <math.h>
#include <stdlib.h>

#include "shard/engine_internal.h"
#include "util/bf16.h"

/* The working values are the bf16 rounding of what is loaded. */
static int rounds(const ft_engine *e) { return e->opt.precision.params == FT_DTYPE_BF16; }

/* Rounded values that an fp32 model takes (stages 0-2) pass through stage_bits too. */
static int rounds_to_fp32(const ft_engine *e)
{
    return rounds(e) && e->opt.zero_stage <= 2 && !ft_engine_hands_bits(e);
}

void ft_engine_frozen_allocate_unit(ft_engine *e, engine_unit *eu)
{
    ft_engine_memory *m = &e->mem;
    eu->loaded_nonfinite = -1;
    if (e->opt.zero_stage <= 2)
        eu->full = ft_engine_alloc(e, eu->padded * (ft_engine_hands_bits(e) ? sizeof(uint16_t)
                                                                           : sizeof(float)),
                                   &m->params);
    else if (rounds(e))
        eu->shard_bf16 = ft_engine_alloc(e, eu->shard * sizeof(uint16_t), &m->params);
    else
        eu->dev_shard = ft_engine_alloc(e, eu->shard * sizeof(float), &m->params);
}

/* The load staging (see above); the gather pool is engine.c's, as for any engine. */
void ft_engine_frozen_allocate_scratch(ft_engine *e)
{
    e->n_grad = 0;
    if (!rounds(e))
        return;
    e->stage_f32 = ft_engine_alloc(e, e->max_shard * sizeof(float), &e->mem.scratch);
    if (rounds_to_fp32(e))
        e->stage_bits = ft_engine_alloc(e, e->max_shard * sizeof(uint16_t), &e->mem.scratch);
}

int ft_engine_frozen_begin_fill(ft_engine *e, ft_error *err)
{
    if (!rounds(e) || e->stage_f32)
        return 0;
    /* a fill after the first: every rank is here (the fill is collective) and every rank
     * must know if one could not allocate, or the others would wait in its all-gathers */
    ft_engine_frozen_allocate_scratch(e);
    double failed = e->stage_f32 && (e->stage_bits || !rounds_to_fp32(e)) ? 0.0 : 1.0;
    if (e->comm->ops->all_reduce_f64_max(e->comm, &failed, 1, err))
        return -1;
    if (failed == 0.0)
        return 0;
    ft_engine_frozen_end_fill(e); /* whatever was allocated */
    return ft_fail(err, "out of device memory on a rank for the frozen model's load staging "
                        "(%zu bytes, one shard of the largest unit); use more ranks",
                   e->max_shard * (sizeof(float) + (rounds_to_fp32(e) ? sizeof(uint16_t) : 0)));
}

void ft_engine_frozen_end_fill(ft_engine *e)
{
    ft_backend *be = e->be;
    if (e->stage_f32) {
        be->ops->free(be, e->stage_f32);
        e->mem.scratch -= e->max_shard * sizeof(float);
        e->stage_f32 = NULL;
    }
    if (e->stage_bits) {
        be->ops->free(be, e->stage_bits);
        e->mem.scratch -= e->max_shard * sizeof(uint16_t);
        e->stage_bits = NULL;
    }
}

/* Device memory that receives unit u's own fp32 slice [S]: the staging buffer when
 * it is rounded, else its final place (the fp32 shard, or the own slice of full). */
static float *device_slice(ft_engine *e, engine_unit *eu)
{
    if (e->stage_f32)
        return e->stage_f32;
    if (eu->dev_shard)
        return eu->dev_shard;
    return (float *)eu->full + (size_t)e->rank * eu->shard;
}

float *ft_engine_frozen_landing(ft_engine *e, engine_unit *eu) { return device_slice(e, eu); }

float *ft_engine_frozen_slice_target(ft_engine *e, engine_unit *eu, float *host)
{
    /* a host backend's memory is the host's: assemble the slice where it goes */
    return e->be->device < 0 ? device_slice(e, eu) : host;
}

static int gather_in_place(ft_engine *e, void *full, size_t own_offset_bytes, size_t bytes,
                           ft_error *err)
{
    ft_comm_request *req = NULL;
    if (e->comm->ops->all_gather(e->comm, full, (char *)full + own_offset_bytes, bytes, &req))
        return ft_fail(err, "parameter all-gather: could not start the collective");
    return ft_comm_wait(e->comm, req, err);
}

/* The first tensor of unit u whose part of the own slice (unit elements [own, own + S),
 * fp32 on the device at dev) holds NaN or Inf, or -1. A NaN or Inf makes the fp64 sum of
 * squares non-finite, and finite fp32 values cannot overflow it (at most 1.2e77 each),
 * so one sum_squares per tensor part is the whole test: a pass over the data the load
 * has just written. */
static int first_nonfinite_tensor(ft_engine *e, int u, const float *dev, size_t own)
{
    const ft_unit_layout *ul = &e->layout.units[u];
    const size_t end = own + e->units[u].shard;
    for (int t = 0; t < ul->n_tensors; t++) {
        size_t lo, hi;
        if (ft_tensor_overlap(&ul->tensors[t], own, end, &lo, &hi) &&
            !isfinite(e->be->ops->sum_squares(e->be, dev + (lo - own), hi - lo)))
            return t;
    }
    return -1;
}

int ft_engine_frozen_adopt(ft_engine *e, int unit, const float *slice, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    const size_t S = eu->shard, own = (size_t)e->rank * S;
    float *dev = device_slice(e, eu);
    if (slice != dev)
        be->ops->upload(be, dev, slice, S * sizeof(float));
    /* checked before rounding: the fp32 values loaded, as a trainable engine's master */
    eu->loaded_nonfinite = first_nonfinite_tensor(e, unit, dev, own);
    if (e->opt.zero_stage == 3) {
        if (eu->shard_bf16)
            be->ops->f32_to_bf16(be, eu->shard_bf16, dev, S);
        be->ops->sync(be); /* the staging buffer is the next unit's */
        return 0;
    }
    if (ft_engine_hands_bits(e)) {
        be->ops->f32_to_bf16(be, (uint16_t *)eu->full + own, dev, S);
        be->ops->sync(be);
        return gather_in_place(e, eu->full, own * sizeof(uint16_t), S * sizeof(uint16_t), err);
    }
    if (e->stage_bits) { /* fp32 values of bf16 parameters: round, widen into place */
        be->ops->f32_to_bf16(be, e->stage_bits, dev, S);
        be->ops->bf16_to_f32(be, (float *)eu->full + own, e->stage_bits, S);
    }
    be->ops->sync(be);
    return gather_in_place(e, eu->full, own * sizeof(float), S * sizeof(float), err);
}

const float *ft_engine_frozen_values(ft_engine *e, int unit, size_t b, size_t end, float *host)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    const size_t n = end - b;
    const float *f32 = eu->dev_shard ? eu->dev_shard
                       : eu->full && !ft_engine_hands_bits(e) ? (const float *)eu->full + b
                                                              : NULL;
    if (f32) {
        if (be->device < 0)
            return f32;
        be->ops->download(be, host, f32, n * sizeof(float));
        return host;
    }
    /* bf16 bits (the stage-3 shard, or the own slice of full): widen on the host */
    const uint16_t *src = eu->shard_bf16 ? eu->shard_bf16 : (const uint16_t *)eu->full + b;
    uint16_t *bits = malloc(n * sizeof *bits + 2);
    if (!bits)
        return NULL;
    be->ops->download(be, bits, src, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++)
        host[i] = ft_bf16_to_f32(bits[i]);
    free(bits);
    return host;
}

int ft_engine_frozen_check_finite(ft_engine *e, ft_engine_finite *out, ft_error *err)
{
    /* One max-reduce finds the lowest bad unit and, within it, the lowest bad tensor on
     * any rank: a rank's key is (n_units - u) * K + (K - 1 - t) for its first bad unit u
     * and tensor t (0: none), with K above any unit's tensor count; keys stay below 2^53,
     * exact in a double. */
    const double K = 4096.0;
    double key = 0.0;
    for (int u = 0; u < e->layout.n_units && key == 0.0; u++)
        if (e->units[u].loaded_nonfinite >= 0)
            key = (double)(e->layout.n_units - u) * K + (K - 1.0 - e->units[u].loaded_nonfinite);
    if (e->comm->ops->all_reduce_f64_max(e->comm, &key, 1, err))
        return -1;
    const long long k = (long long)key, units_left = k / (long long)K;
    out->unit = key > 0.0 ? e->layout.n_units - (int)units_left : -1;
    out->tensor = key > 0.0 ? (int)(K - 1.0) - (int)(k % (long long)K) : -1;
    out->element = -1; /* the load records tensors only */
    out->what = key > 0.0 ? FT_ENGINE_NONFINITE_PARAMS : 0;
    return 0;
}

int ft_engine_frozen_refuse(ft_error *err, const char *what)
{
    return ft_fail(err, "%s: the engine is frozen (it holds working parameters only: no "
                        "gradients, master or optimizer state)", what);
}
