/* The optimizer's update beside the next step's forward.
 *
 * AdamW is memory-bound (about 30 bytes a parameter: 12.6 ms of a 94 ms step for a 1.2 B
 * model on an H100), the forward's GEMMs compute-bound; run one after the other, the
 * update leaves the tensor cores idle and the forward leaves bandwidth unused. With a
 * backend that has a side lane (backend.h, lane_fork) the step queues every unit's update
 * there, in unit order, marking each unit's completion, and returns without waiting; the
 * next step's forward waits (on the device, not the host) for exactly the unit it
 * acquires. So the update of the blocks after the one the forward is in runs beside it.
 * (In the bf16 recipe the embedding's update goes last, after the next lookup's rows of
 * it: engine_lookup.c.)
 *
 * What keeps it correct: the update reads the unit's gradient, master and moments and
 * writes its master, moments and working parameters, so nothing may touch those until the
 * unit's mark:
 *   - the model reaches parameters only through acquire, which awaits the unit's mark
 *     (ft_engine_await_update), and gradients only between acquire and release;
 *   - zero_grads, called before the forward, must not reset a gradient the update may
 *     still read: the reset is deferred to the unit's first gradient request (after its
 *     acquire) or to the settling below;
 *   - every other entry point that reads or writes the state (gradient reduction and
 *     norm, checkpoints, loads, finite checks, downloads, free) settles first: the main
 *     lane awaits all the side lane's work and the deferred resets are made.
 * The harness's happens-before checker (test/cudaemu) sees a missing wait as a race on
 * those buffers; test/cuda/test_cuda_overlap.sh compares the training bitwise with and
 * without the overlap.
 *
 * The gradient norm's sums of squares run on the side lane too, beside the backward
 * (ft_engine_early_norm_*): on one rank (no reduction to wait for), a unit's gradient is
 * final at its grad_done on the window's last micro-batch (ft_engine_set_final_micro),
 * and its sum (the kernel and partials sum_squares_each uses, so bitwise the same value)
 * then runs beside the blocks' backward that follow; on several ranks it starts as soon
 * as the unit's reduction is waited for (engine_reduce.c), beside the reductions still
 * in flight. The norm settles (the main lane
 * awaits the side lane), reads the sums back with one copy and adds them in unit order
 * as before. The next step's reset of that gradient comes after its acquire, which
 * awaits a mark recorded after the sum on the same lane.
 *
 * Stages 1 and 2 in the bf16 recipe defer their parameter all-gathers the same way,
 * without a side lane (ft_engine_start_deferred_gather): the update writes each unit's bits
 * into the rank's own slice of the unit's working parameters, the all-gather starts there
 * in place and is not waited for; acquire waits for the unit's gather (on NCCL the compute
 * stream waits on its event), settling for all. FTMPI_GATHER_OVERLAP=0 turns it off.
 *
 * The side lane is used with zero_stage 0 only (the update and the publication of its
 * bf16 bits are local kernels; the stages that all-gather after the update would put
 * the collectives on the side lane) and without offload (the update runs on the host).
 * FTMPI_OPTIMIZER_OVERLAP=0 turns it off, to time the difference. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

int ft_engine_overlap_wanted(const ft_engine *e)
{
    const char *env = getenv("FTMPI_OPTIMIZER_OVERLAP");
    if (env && !strcmp(env, "0"))
        return 0;
    const ft_backend_ops *ops = e->be->ops;
    return ops->lane_fork && ops->lane_mark && ops->lane_join && ops->lane_await &&
           !e->opt.frozen && e->opt.zero_stage == 0 && !e->opt.offload_optimizer &&
           e->opt_be == e->be;
}

void ft_engine_overlap_begin(ft_engine *e)
{
    e->be->ops->lane_fork(e->be, true); /* the optimizer phase times the side lane */
}

void ft_engine_overlap_unit_done(ft_engine *e, int unit)
{
    e->be->ops->lane_mark(e->be, unit);
    e->units[unit].update_pending = 1;
    e->side_pending = 1;
}

void ft_engine_overlap_end(ft_engine *e)
{
    e->be->ops->lane_join(e->be);
}

/* Waits for unit's deferred all-gather; a failure is the engine's to report
 * (ft_engine_status), as the source's other collectives' are. */
static void await_gather(ft_engine *e, engine_unit *eu)
{
    if (!eu->gather_req)
        return;
    if (ft_comm_wait(e->comm, eu->gather_req, &e->error))
        ft_engine_record_failure(e, "parameter all-gather", (int)(eu - e->units));
    eu->gather_req = NULL;
}

void ft_engine_await_update(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    await_gather(e, eu);
    if (!eu->update_pending)
        return;
    e->be->ops->lane_await(e->be, unit);
    eu->update_pending = 0;
}

void ft_engine_settle_updates(ft_engine *e)
{
    if (e->gather_overlap)
        for (int u = 0; u < e->layout.n_units; u++)
            await_gather(e, &e->units[u]);
    if (!e->side_pending)
        return;
    e->be->ops->lane_await(e->be, -1);
    for (int u = 0; u < e->layout.n_units; u++) {
        e->units[u].update_pending = 0;
        ft_engine_take_deferred_reset(e, u);
    }
    e->side_pending = 0;
}

int ft_engine_defer_reset(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!eu->update_pending)
        return 0;
    eu->reset_deferred = 1;
    return 1;
}

void ft_engine_take_deferred_reset(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!eu->reset_deferred)
        return;
    eu->reset_deferred = 0;
    ft_engine_reset_grad(e, unit, eu->grad_full, sizeof(float), &eu->grad_unset);
}

int ft_engine_gather_overlap_wanted(const ft_engine *e)
{
    const char *env = getenv("FTMPI_GATHER_OVERLAP");
    if (env && !strcmp(env, "0"))
        return 0;
    return !e->opt.frozen && (e->opt.zero_stage == 1 || e->opt.zero_stage == 2) &&
           ft_engine_hands_bits(e) && e->opt.precision.has_master && !e->opt.offload_optimizer;
}

int ft_engine_start_deferred_gather(ft_engine *e, int unit, ft_error *err)
{
    engine_unit *eu = &e->units[unit];
    uint16_t *full = eu->full;
    const size_t S = eu->shard;
    if (e->comm->ops->all_gather(e->comm, full, full + (size_t)e->rank * S, S * sizeof(uint16_t),
                                 &eu->gather_req)) {
        ft_comm_wait(e->comm, eu->gather_req, NULL);
        eu->gather_req = NULL;
        return ft_fail(err, "parameter all-gather of unit %d could not start", unit);
    }
    return 0;
}

int ft_engine_early_norm_wanted(const ft_engine *e)
{
    return e->be->ops->sum_squares_start != NULL;
}

void ft_engine_set_final_micro(ft_engine *e, bool final)
{
    e->final_micro = final;
}

/* Queues unit's sum of squares on the side lane, after the main lane's work so far. */
static void start_sum(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    /* the norm's range: stage 0, the whole unit */
    const float *g = eu->grad_full + eu->opt_begin;
    ft_engine_settle_grad(e, unit, eu->grad_full, sizeof(float), &eu->grad_unset);
    e->be->ops->lane_fork(e->be, false); /* the backward phase stays on the main lane */
    e->be->ops->sum_squares_start(e->be, g, eu->opt_end - eu->opt_begin, &e->norm_sums[unit]);
    e->be->ops->lane_join(e->be);
    eu->sum_started = 1;
    e->side_pending = 1; /* the norm's settling awaits the side lane */
}

void ft_engine_early_norm_unit(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    /* several ranks: the sum needs the reduced gradient (ft_engine_early_norm_reduced) */
    if (!e->early_norm || !e->final_micro || e->size > 1 || eu->sum_started || !eu->grad_full)
        return;
    start_sum(e, unit);
}

void ft_engine_early_norm_reduced(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!e->early_norm || eu->sum_started || !eu->grad_full)
        return;
    start_sum(e, unit);
}

void ft_engine_early_norm_take(ft_engine *e, double *each, unsigned char *got)
{
    const int n = e->layout.n_units;
    int any = 0;
    for (int u = 0; u < n; u++)
        any |= got[u] = (unsigned char)e->units[u].sum_started;
    if (!any)
        return;
    e->be->ops->download(e->be, each, e->norm_sums, (size_t)n * sizeof(double));
    for (int u = 0; u < n; u++)
        e->units[u].sum_started = 0;
}
