/* Stages 0-1 on several ranks: the gradient reduction beside the backward.
 *
 * At stages 0 and 1 every rank accumulates whole gradients over the window and sums them
 * across ranks once per unit: stage 0 with an all-reduce (every rank updates the whole
 * unit), stage 1 with a reduce-scatter in place, since a rank updates only its own slice
 * (half the traffic; the rest of the buffer then holds partial sums that nothing reads
 * before the next reset, and the update's all-gather brings the parameters back whole).
 * Issued after the whole backward, that traffic (an all-reduce moves 8 bytes a parameter
 * through a ring, 4 each way: about 10 GB a step for a 1.2 B model) adds to the step's
 * time. A unit's gradient is final at its grad_done on the accumulation window's last
 * micro-batch (ft_engine_set_final_micro; the model reports a unit done once a micro-batch,
 * after its last contribution, a tied embedding after its own backward), so its
 * reduction starts there, as PyTorch's DDP starts a bucket's, and runs beside the backward
 * of the units after it. reduce_grads starts the units that were not started (those no
 * grad_done reached) and then waits for all.
 *
 * What keeps it correct: nothing writes a unit's gradient between its final grad_done and
 * reduce_grads (the window's backward is over for it), and every rank starts the same
 * collectives in the same order (the model's order of grad_done calls, then unit order):
 * MPI's non-blocking collectives and NCCL's stream alike need that. NCCL orders its stream
 * after the compute stream's work so far (comm_nccl.c); the CPU backend is synchronous.
 * Anything that could touch a gradient outside the window (zero_grads, free) first waits
 * for every started reduction (ft_engine_flush_grads). The values are the same: the same
 * buffers, the same collective, only issued earlier (test/shard/test_reduce_overlap.sh
 * compares training with and without it bitwise).
 *
 * With grad_reduce_dtype bf16 a unit's window gradient is rounded into a staging buffer
 * and reduced there, then widened back into its fp32 buffer (stage 1: its own slice). Two
 * staging buffers (the size of the largest unit each) take units in turn, so one unit's
 * reduction runs while the next is rounded and the backward goes on; a buffer is reused
 * after its unit's reduction is waited for and widened. Without the overlap one buffer
 * serves, a unit at a time after the backward: the same collectives on the same values.
 * FTMPI_REDUCE_OVERLAP=0 turns it off, to time the difference. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

int ft_engine_early_reduce_wanted(const ft_engine *e)
{
    const char *env = getenv("FTMPI_REDUCE_OVERLAP");
    if (env && !strcmp(env, "0"))
        return 0;
    return e->size > 1 && !e->opt.frozen && e->opt.zero_stage <= 1;
}

/* Waits for unit u's started reduction, if any; err NULL: failures are not reported. */
static int wait_unit(ft_engine *e, engine_unit *eu, ft_error *err)
{
    if (!eu->reduce_req)
        return 0;
    int rc = ft_comm_wait(e->comm, eu->reduce_req, err);
    eu->reduce_req = NULL;
    return rc;
}

/* bf16: waits for the reduction staged in slot, if any, and widens it back into its
 * unit's fp32 gradient (stage 1: the own slice, the rest of the staged values being
 * partial sums). The slot is free after. */
static int finish_slot(ft_engine *e, int slot, ft_error *err, bool norms)
{
    const int u = e->bits_unit[slot];
    if (u < 0)
        return 0;
    engine_unit *eu = &e->units[u];
    const uint16_t *bits = e->bits_slot[slot];
    const size_t own = e->opt.zero_stage == 1 ? (size_t)e->rank * eu->shard : 0;
    const size_t n = e->opt.zero_stage == 1 ? eu->shard : eu->numel;
    e->bits_unit[slot] = -1;
    if (wait_unit(e, eu, err))
        return -1;
    e->be->ops->bf16_to_f32(e->be, eu->grad_full + own, bits + own, n);
    if (norms)
        ft_engine_early_norm_reduced(e, u);
    return 0;
}

/* Starts unit u's reduction of its window gradient: fp32 in place, or rounded into the
 * next staging slot (waiting for and widening the unit that held it). Stage 1
 * reduce-scatters in place: the own slice [rank S, rank S + S) of the padded unit. */
static int start_unit(ft_engine *e, engine_unit *eu, ft_error *err)
{
    const size_t own = (size_t)e->rank * eu->shard;
    const int scatter = e->opt.zero_stage == 1;
    const ft_comm_ops *c = e->comm->ops;
    if (!e->bits_slot[0])
        return scatter ? c->reduce_scatter_f32(e->comm, eu->grad_full + own, eu->grad_full,
                                               eu->shard, &eu->reduce_req)
                       : c->all_reduce_f32(e->comm, eu->grad_full, eu->numel, &eu->reduce_req);
    const int slot = e->bits_next;
    if (finish_slot(e, slot, err, true))
        return -1;
    e->bits_next = e->bits_slot[1] ? slot ^ 1 : 0;
    uint16_t *bits = e->bits_slot[slot];
    e->be->ops->f32_to_bf16(e->be, bits, eu->grad_full, scatter ? eu->padded : eu->numel);
    e->bits_unit[slot] = (int)(eu - e->units);
    return scatter ? c->reduce_scatter_bf16(e->comm, bits + own, bits, eu->shard, &eu->reduce_req)
                   : c->all_reduce_bf16(e->comm, bits, eu->numel, &eu->reduce_req);
}

int ft_engine_early_reduce_unit(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!e->early_reduce || !e->final_micro || eu->reduce_started || !eu->grad_full)
        return 0;
    /* a unit this window never wrote is zero (its first request would have settled it) */
    ft_engine_settle_grad(e, unit, eu->grad_full, sizeof(float), &eu->grad_unset);
    eu->reduce_started = 1;
    return start_unit(e, eu, NULL);
}

/* Waits for every started reduction (bf16: and widens the staged ones); the window's
 * reduction is over. norms: each unit's sum of squares for the norm starts as soon as
 * its reduction is waited for (not when a window is abandoned). */
static int finish_all(ft_engine *e, ft_error *err, bool norms)
{
    int rc = 0;
    for (int slot = 0; slot < 2; slot++)
        if (finish_slot(e, slot, rc ? NULL : err, norms))
            rc = -1;
    for (int u = 0; u < e->layout.n_units; u++) {
        if (wait_unit(e, &e->units[u], rc ? NULL : err))
            rc = -1;
        else if (norms)
            ft_engine_early_norm_reduced(e, u);
        e->units[u].reduce_started = 0;
    }
    return rc;
}

void ft_engine_finish_early_reduces(ft_engine *e)
{
    if (e->early_reduce)
        finish_all(e, NULL, false);
}

int ft_engine_reduce_full_grads(ft_engine *e, ft_error *err)
{
    ft_engine_settle_all_grads(e); /* a unit no micro-batch wrote is zero */
    if (e->size == 1)
        return 0;
    /* Start every unit the backward did not, in unit order, then wait for all: the
     * transport may pipeline them. */
    int rc = 0;
    for (int u = 0; u < e->layout.n_units && !rc; u++) {
        engine_unit *eu = &e->units[u];
        if (!eu->reduce_started && start_unit(e, eu, err))
            rc = ft_fail(err, "gradient reduction of unit %d failed", u);
    }
    if (finish_all(e, rc ? NULL : err, !rc))
        rc = -1;
    return rc;
}
