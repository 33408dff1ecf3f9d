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
 * fp32 reduction only: the bf16 reduction goes through one staging buffer, a unit at a
 * time, after the backward (overlapping it would take a second staging buffer the size of
 * the largest unit). FTMPI_REDUCE_OVERLAP=0 turns it off, to time the difference. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

int ft_engine_early_reduce_wanted(const ft_engine *e)
{
    const char *env = getenv("FTMPI_REDUCE_OVERLAP");
    if (env && !strcmp(env, "0"))
        return 0;
    return e->size > 1 && !e->opt.frozen && e->opt.zero_stage <= 1 && !e->grad_bits;
}

/* Starts unit u's reduction of its fp32 gradient (the window's sum on this rank). */
static int start_unit(ft_engine *e, engine_unit *eu)
{
    if (e->opt.zero_stage == 1) /* the own slice [rank S, rank S + S) of the padded unit */
        return e->comm->ops->reduce_scatter_f32(e->comm, eu->grad_full + (size_t)e->rank * eu->shard,
                                                eu->grad_full, eu->shard, &eu->reduce_req);
    return e->comm->ops->all_reduce_f32(e->comm, eu->grad_full, eu->numel, &eu->reduce_req);
}

int ft_engine_early_reduce_unit(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!e->early_reduce || !e->final_micro || eu->reduce_req || !eu->grad_full)
        return 0;
    /* a unit this window never wrote is zero (its first request would have settled it) */
    ft_engine_settle_grad(e, unit, eu->grad_full, sizeof(float), &eu->grad_unset);
    return start_unit(e, eu);
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

void ft_engine_finish_early_reduces(ft_engine *e)
{
    if (!e->early_reduce)
        return;
    for (int u = 0; u < e->layout.n_units; u++)
        wait_unit(e, &e->units[u], NULL);
}

/* bf16: one unit at a time through the staging buffer, after the backward; stage 1
 * reduce-scatters in place there and widens its own slice only. */
static int reduce_through_bits(ft_engine *e, ft_error *err)
{
    const int scatter = e->opt.zero_stage == 1;
    for (int u = 0; u < e->layout.n_units; u++) {
        engine_unit *eu = &e->units[u];
        ft_comm_request *req = NULL;
        const size_t own = (size_t)e->rank * eu->shard;
        e->be->ops->f32_to_bf16(e->be, e->grad_bits, eu->grad_full, scatter ? eu->padded : eu->numel);
        e->be->ops->sync(e->be);
        int rc = scatter ? e->comm->ops->reduce_scatter_bf16(e->comm, e->grad_bits + own, e->grad_bits,
                                                            eu->shard, &req)
                         : e->comm->ops->all_reduce_bf16(e->comm, e->grad_bits, eu->numel, &req);
        if (rc || ft_comm_wait(e->comm, req, err))
            return ft_fail(err, "bf16 gradient reduction of unit %d failed", u);
        if (scatter)
            e->be->ops->bf16_to_f32(e->be, eu->grad_full + own, e->grad_bits + own, eu->shard);
        else
            e->be->ops->bf16_to_f32(e->be, eu->grad_full, e->grad_bits, eu->numel);
    }
    return 0;
}

int ft_engine_reduce_full_grads(ft_engine *e, ft_error *err)
{
    ft_engine_settle_all_grads(e); /* a unit no micro-batch wrote is zero */
    if (e->size == 1)
        return 0;
    e->be->ops->sync(e->be);
    if (e->grad_bits)
        return reduce_through_bits(e, err);
    /* Start every unit the backward did not, then wait for all, in unit order: the
     * transport may pipeline them. */
    const int n = e->layout.n_units;
    int rc = 0;
    for (int u = 0; u < n && !rc; u++) {
        engine_unit *eu = &e->units[u];
        if (!eu->reduce_req && start_unit(e, eu))
            rc = ft_fail(err, "gradient reduction of unit %d could not start", u);
    }
    for (int u = 0; u < n; u++)
        if (wait_unit(e, &e->units[u], rc ? NULL : err))
            rc = -1;
    return rc;
}
