/* The optimizer offloaded to the host (offload_optimizer): its host buffers, and how a
 * step's transfers overlap the host's update.
 *
 * Per unit a step brings the rank's gradient slice down (fp32, 4 bytes a parameter) and
 * sends up what publishing needs: the bf16 working bits the host's AdamW wrote (2 bytes
 * a parameter) in the bf16 recipe, the fp32 master values (4) in the fp32 one. The host
 * buffers come in pairs, page-locked where the device backend has such memory, and the
 * units take turns. On a backend with a side lane (CUDA) the downloads run there and the
 * uploads on the main lane:
 *
 *   turn i:  wait for the side lane (unit i's gradient is down)
 *            queue unit i+1's gradient down into the other gradient buffer (side lane,
 *            after the main lane's work so far: unit i-1's upload)
 *            AdamW of unit i on the host, from and into this turn's buffers
 *            queue unit i's upload (main lane)
 *
 * so the host's update of unit i runs while the bus takes unit i-1's result up and
 * brings unit i+1's gradient down. A turn's buffers are written again two turns later:
 * its gradient buffer by unit i+2's download, queued once the host's update of unit i
 * is over; its bits by the host's update of unit i+2, after turn i+2's wait for that
 * download, which the side lane's fork had ordered after unit i's upload. Without a
 * side lane the turn's wait is for everything queued, the last upload included; without
 * asynchronous copies (the CPU) the same order runs with copies that return done.
 * Outside a step (loading, publishing a checkpoint's values) an upload returns done. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

/* Counted as host memory like the master and moments; page-locked from the device
 * backend when it has such memory, else from the optimizer's host backend. */
static void *host_buffer(ft_engine *e, size_t bytes, int pinned)
{
    static char dry_run_token;
    e->mem.host += bytes;
    if (e->dry_run)
        return &dry_run_token;
    void *p = pinned ? e->be->ops->host_alloc(e->be, bytes) : e->opt_be->ops->alloc(e->opt_be, bytes);
    if (!p && !pinned)
        e->failed = 1;
    if (p && pinned)
        e->mem.host_pinned += bytes;
    return p;
}

static void release(ft_engine *e)
{
    engine_offload *o = &e->offload;
    void *bufs[] = { o->grad[0], o->grad[1], o->bits[0], o->bits[1] };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i])
            continue;
        if (o->pinned)
            e->be->ops->host_free(e->be, bufs[i]);
        else
            e->opt_be->ops->free(e->opt_be, bufs[i]);
    }
    *o = (engine_offload){ 0 };
}

static int allocate_buffers(ft_engine *e, size_t max_opt, int pinned)
{
    engine_offload *o = &e->offload;
    const size_t host0 = e->mem.host;
    int ok = 1;
    o->pinned = pinned;
    for (int i = 0; i < 2; i++) {
        ok &= (o->grad[i] = host_buffer(e, max_opt * sizeof(float), pinned)) != NULL;
        if (e->opt.precision.has_master)
            ok &= (o->bits[i] = host_buffer(e, max_opt * sizeof(uint16_t), pinned)) != NULL;
    }
    if (!ok && !e->dry_run) { /* out of locked memory: all of them in pageable memory */
        release(e);
        e->mem.host = host0;
        e->mem.host_pinned = 0;
    }
    return ok;
}

void ft_engine_offload_allocate(ft_engine *e)
{
    size_t max_opt = 0;
    for (int u = 0; u < e->layout.n_units; u++)
        if (ft_engine_opt_len(e, &e->units[u]) > max_opt)
            max_opt = ft_engine_opt_len(e, &e->units[u]);
    /* a dry run (the planner) has no backend: it counts the same bytes.
     * FTMPI_OFFLOAD_OVERLAP=0: pageable buffers and copies that return done (one unit at
     * a time, as before the turns overlapped), to time the difference */
    const char *env = getenv("FTMPI_OFFLOAD_OVERLAP");
    const int can_pin = !e->dry_run && e->be->ops->host_alloc && e->be->ops->host_free &&
                        !(env && strcmp(env, "0") == 0);
    if (!(can_pin && allocate_buffers(e, max_opt, 1)))
        allocate_buffers(e, max_opt, 0);
}

void ft_engine_offload_free(ft_engine *e)
{
    if (!e->dry_run)
        release(e);
}

/* Downloads on the side lane, uploads on the main one: a backend with lanes and
 * asynchronous copies, and page-locked buffers. */
static int downloads_aside(const ft_engine *e)
{
    const ft_backend_ops *ops = e->be->ops;
    return e->offload.pinned && ops->download_async && ops->lane_fork && ops->lane_join &&
           ops->lane_sync;
}

/* The reduced gradient over this rank's optimizer range down into the buffer of slot. */
static void fetch_grad(ft_engine *e, int unit, int slot)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    const size_t bytes = (eu->opt_end - eu->opt_begin) * sizeof(float);
    float *dst = e->offload.grad[slot];
    if (downloads_aside(e)) {
        be->ops->lane_fork(be, false); /* after the main lane's work: the gradient, the
                                          last upload */
        be->ops->download_async(be, dst, ft_engine_opt_grads(eu), bytes);
        be->ops->lane_join(be);
    } else if (be->ops->download_async && e->offload.pinned) {
        be->ops->download_async(be, dst, ft_engine_opt_grads(eu), bytes);
    } else {
        be->ops->download(be, dst, ft_engine_opt_grads(eu), bytes);
    }
}

void ft_engine_offload_begin(ft_engine *e, int first_unit)
{
    e->offload.in_step = 1;
    e->offload.turn = -1;
    fetch_grad(e, first_unit, 0);
}

float *ft_engine_offload_turn(ft_engine *e, int next_unit)
{
    engine_offload *o = &e->offload;
    if (downloads_aside(e))
        e->be->ops->lane_sync(e->be); /* this turn's gradient down (and the upload before
                                         the last, which its download's fork waited for) */
    else
        e->be->ops->sync(e->be); /* this turn's gradient down, the last turn's upload done */
    o->turn++;
    if (next_unit >= 0)
        fetch_grad(e, next_unit, (o->turn + 1) & 1);
    return o->grad[o->turn & 1];
}

void ft_engine_offload_end(ft_engine *e)
{
    if (!e->offload.in_step)
        return;
    /* the last turn waited for the last download; this, for the last upload */
    e->be->ops->sync(e->be);
    e->offload.in_step = 0;
}

uint16_t *ft_engine_offload_bits(ft_engine *e)
{
    return e->offload.bits[e->offload.in_step ? e->offload.turn & 1 : 0];
}

/* bytes from host memory src to dst: queued in a step (the next turn's sync waits for
 * it), done on return outside one */
static void send_up(ft_engine *e, void *dst, const void *src, size_t bytes)
{
    ft_backend *be = e->be;
    if (e->offload.in_step && be->ops->upload_async && e->offload.pinned)
        be->ops->upload_async(be, dst, src, bytes);
    else
        be->ops->upload(be, dst, src, bytes);
}

/* fp32 recipe: the host's master values straight to where the model's parameters take
 * them (at stages 1-2 the unit's own slice, gathered in place). */
static int publish_f32(ft_engine *e, int unit, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be;
    switch (e->opt.zero_stage) {
    case 0:
        send_up(e, eu->full, eu->master, eu->numel * sizeof(float));
        return 0;
    case 1:
    case 2: {
        float *own = (float *)eu->full + (size_t)e->rank * eu->shard;
        send_up(e, own, eu->master, eu->shard * sizeof(float));
        be->ops->sync(be);
        return ft_engine_gather_f32(e, eu->full, own, eu->shard, err);
    }
    default:
        send_up(e, eu->dev_shard, eu->master, eu->shard * sizeof(float));
        return 0;
    }
}

/* bf16 recipe: the host rounds what the update did not (all of the opt range, or only
 * the last rank's padding after it) and the bits go where the device's rounding would
 * have written them; then the gathers as on the device. Both sides round to nearest
 * even, so these are the bits of a run without offload. */
static int publish_bits(ft_engine *e, int unit, int bits_ready, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    ft_backend *be = e->be, *obe = e->opt_be;
    uint16_t *bits = ft_engine_offload_bits(e);
    const size_t len = ft_engine_opt_len(e, eu);
    const size_t done = bits_ready ? eu->opt_end - eu->opt_begin : 0;
    obe->ops->f32_to_bf16(obe, bits + done, eu->master + done, len - done);
    const size_t bytes = len * sizeof(uint16_t);
    switch (e->opt.zero_stage) {
    case 0: /* the whole unit */
        if (ft_engine_hands_bits(e)) {
            send_up(e, eu->full, bits, bytes);
        } else {
            send_up(e, e->gather_bits, bits, bytes);
            be->ops->bf16_to_f32(be, eu->full, e->gather_bits, len);
        }
        return 0;
    case 1:
    case 2:
        send_up(e, e->stage_bits, bits, bytes);
        be->ops->sync(be);
        return ft_engine_gather_bits_into(e, eu->full, e->stage_bits, len, err);
    default: /* stage 3: gathers read these bits */
        send_up(e, eu->shard_bf16, bits, bytes);
        return 0;
    }
}

int ft_engine_offload_publish(ft_engine *e, int unit, int bits_ready, ft_error *err)
{
    return e->opt.precision.has_master ? publish_bits(e, unit, bits_ready, err)
                                       : publish_f32(e, unit, err);
}
