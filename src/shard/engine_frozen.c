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
 * assembles its own fp32 slice [S] of one unit at a time in host memory
 * (max_shard floats, malloc'd there), and this file makes it working storage. Where
 * the values are rounded to bf16 (precision.params bf16) the slice is staged on the
 * device in stage_f32 (4 x max_shard bytes, counted as scratch) and rounded from there
 * with the backend's f32_to_bf16, the op a trainable engine publishes with; fp32
 * values rounded for an fp32 model (stages 0-2) also pass through stage_bits (2 x
 * max_shard bytes). Without rounding the slice goes straight to its place. Stages 0-2
 * then all-gather the unit in place. So no fp32 copy of a unit exists beyond one
 * shard, and the values are bitwise those of a trainable engine after the same load:
 * the same rounding op on the same fp32 values. */
#include <stdlib.h>

#include "shard/engine_internal.h"
#include "util/bf16.h"

/* The working values are the bf16 rounding of what is loaded. */
static int rounds(const ft_engine *e) { return e->opt.precision.params == FT_DTYPE_BF16; }

void ft_engine_frozen_allocate_unit(ft_engine *e, engine_unit *eu)
{
    ft_engine_memory *m = &e->mem;
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
    if (e->opt.zero_stage <= 2 && !ft_engine_hands_bits(e))
        e->stage_bits = ft_engine_alloc(e, e->max_shard * sizeof(uint16_t), &e->mem.scratch);
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

int ft_engine_frozen_adopt(ft_engine *e, int unit, const float *slice, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    const size_t S = eu->shard, own = (size_t)e->rank * S;
    float *dev = device_slice(e, eu);
    if (slice != dev)
        be->ops->upload(be, dev, slice, S * sizeof(float));
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

int ft_engine_frozen_refuse(ft_error *err, const char *what)
{
    return ft_fail(err, "%s: the engine is frozen (it holds working parameters only: no "
                        "gradients, master or optimizer state)", what);
}
