/* The optimizer's update beside the next step's forward.
 *
 * AdamW is memory-bound (about 30 bytes a parameter: 12.6 ms of a 94 ms step for a 1.2 B
 * model on an H100), the forward's GEMMs compute-bound; run one after the other, the
 * update leaves the tensor cores idle and the forward leaves bandwidth unused. With a
 * backend that has a side lane (backend.h, lane_fork) the step queues every unit's update
 * there, in unit order, marking each unit's completion, and returns without waiting; the
 * next step's forward waits (on the device, not the host) for exactly the unit it
 * acquires. So the update of the blocks after the one the forward is in runs beside it.
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
 * Used with zero_stage 0 only (the update and the publication of its bf16 bits are local
 * kernels; the stages that all-gather after the update would put the collectives on the
 * side lane), without offload (the update runs on the host) and without the test hook
 * that poisons unset gradients (it uploads). FTMPI_OPTIMIZER_OVERLAP=0 turns it off, to
 * time the difference. */
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
           e->opt_be == e->be && e->unset_mode != FT_UNSET_POISON;
}

void ft_engine_overlap_begin(ft_engine *e)
{
    e->be->ops->lane_fork(e->be);
}

void ft_engine_overlap_unit_done(ft_engine *e, int unit)
{
    e->be->ops->lane_mark(e->be, unit);
    e->units[unit].update_pending = 1;
    e->updates_pending = 1;
}

void ft_engine_overlap_end(ft_engine *e)
{
    e->be->ops->lane_join(e->be);
}

void ft_engine_await_update(ft_engine *e, int unit)
{
    engine_unit *eu = &e->units[unit];
    if (!eu->update_pending)
        return;
    e->be->ops->lane_await(e->be, unit);
    eu->update_pending = 0;
}

void ft_engine_settle_updates(ft_engine *e)
{
    if (!e->updates_pending)
        return;
    e->be->ops->lane_await(e->be, -1);
    for (int u = 0; u < e->layout.n_units; u++) {
        e->units[u].update_pending = 0;
        ft_engine_take_deferred_reset(e, u);
    }
    e->updates_pending = 0;
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
