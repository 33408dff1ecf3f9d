/* The model at work on batches: one optimizer step over the global batch (rows, the
 * accumulated micro-batches, reduction, clipping, the update) and the evaluation of a
 * dataset file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/phase_time.h"
#include "comm/world.h"
#include "optim/schedule.h"
#include "train/loader.h"
#include "train/mfu.h"
#include "train/trainer.h"
#include "train/watchdog.h"

ft_param_source ft_trainer_model_source(ft_trainer *t)
{
    return ft_engine_param_source(t->base ? t->base : t->engine);
}

/* ---------------------------------------------------------------- one step */

static long count_targets(const uint8_t *mask, int rows, int W)
{
    long n = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 1; j < W; j++)
            n += mask[(size_t)r * W + j] != 0;
    return n;
}

/* The dataset rows this rank trains on in `step` (data_order.h). */
static void step_rows(ft_trainer *t, long step, int64_t *rows)
{
    const int64_t G = t->cfg->global_batch_size, P = t->comm->size;
    for (int j = 0; j < t->rows_per_rank; j++)
        rows[j] = ft_data_order_row(&t->order, t->sample_base + (step - t->start_step) * G +
                                                   (int64_t)t->comm->rank * (G / P) + j);
}

/* The global sample number of rows[0] of step_rows (LoRA dropout's masks follow it). */
static int64_t step_first_sample(const ft_trainer *t, long step)
{
    const int64_t G = t->cfg->global_batch_size, P = t->comm->size;
    return t->sample_base + (step - t->start_step) * G + (int64_t)t->comm->rank * (G / P);
}

/* Tells the engine the ids of step `next`'s first micro-batch where the loader has
 * already read them, so that its update can make those embedding rows first. */
static void announce_next_lookup(ft_trainer *t, long next)
{
    if (!(ft_engine_beside_compute(t->engine) & FT_ENGINE_BESIDE_LOOKUP))
        return;
    const uint32_t *tokens = ft_loader_peek(t->loader, next);
    if (tokens) /* the rows of W tokens: the first T of each are the inputs */
        ft_engine_announce_lookup(t->engine, tokens, t->cfg->micro_batch_size,
                                  (size_t)t->seq_len + 1, t->seq_len);
}

int ft_trainer_step(ft_trainer *t, long step, ft_step_stats *st, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    const double t0 = ft_world_seconds();
    const uint64_t sent0 = t->dev_comm->stats.bytes_sent;
    const double wait0 = t->dev_comm->stats.seconds_in_wait;
    const int R = t->rows_per_rank, W = t->seq_len + 1;

    ft_watchdog_progress(t->watchdog, "reading the step's rows");
    const double read0 = ft_world_seconds();
    int64_t rows[R];
    step_rows(t, step, rows);
    uint32_t *tokens;
    uint8_t *loss_mask;
    int32_t *segment;
    if (ft_loader_take(t->loader, step, rows, R, &tokens, &loss_mask, &segment, err))
        return ft_fail_context_path(err, cfg->train_data);
    if (step + 1 < cfg->max_steps) { /* the next step's rows, read while this one computes */
        step_rows(t, step + 1, rows);
        ft_loader_request(t->loader, step + 1, rows, R);
    }
    st->data_wait = ft_world_seconds() - read0;
    ft_watchdog_progress(t->watchdog, "in forward/backward (waiting for collectives)");

    /* Every token's gradient is scaled by 1 / (targets in the global batch), so the
     * summed gradient is that of the global mean loss, whatever P and accum are. */
    /* with the visible (query, key) pairs, for MFU (train/mfu.h), in the same reduction */
    int64_t counts[2] = { count_targets(loss_mask, R, W),
                          ft_mfu_visible_keys(segment, R, W, t->seq_len,
                                              t->layout.config.sliding_window) };
    if (t->comm->ops->all_reduce_i64_sum(t->comm, counts, 2, err))
        return -1;
    const int64_t n_global = counts[0];
    st->visible_keys = counts[1];
    float grad_scale = n_global > 0 ? 1.0f / (float)n_global : 0.0f;
    const char *fault = getenv("FTMPI_FAULT"); /* test hook: nan:<step> poisons a gradient */
    if (fault && !strncmp(fault, "nan:", 4) && atol(fault + 4) == step + 1)
        grad_scale = NAN;

    ft_param_source src = ft_trainer_model_source(t);
    ft_engine_zero_grads(t->engine);
    double loss_sum = 0.0;
    const int mb = cfg->micro_batch_size;
    for (int a = 0; a < t->accum; a++) {
        const size_t off = (size_t)a * mb * W;
        ft_host_batch b = { .batch = mb, .seq_len = t->seq_len, .tokens = tokens + off,
                            .loss_mask = loss_mask + off, .segment = segment + off,
                            .first_sample = step_first_sample(t, step) + (int64_t)a * mb };
        double ls;
        long nt;
        ft_engine_set_final_micro(t->engine, a == t->accum - 1);
        if (ft_model_train_micro(t->model, &src, &b, grad_scale, &ls, &nt, err))
            return ft_fail_context_path(err, cfg->train_data);
        if (ft_engine_status(t->engine, err))
            return -1;
        loss_sum += ls;
    }
    ft_engine_set_final_micro(t->engine, false);
    ft_phase_begin(t->be, FT_PHASE_REDUCE);
    if (ft_engine_reduce_grads(t->engine, err) ||
        t->comm->ops->all_reduce_f64_sum(t->comm, &loss_sum, 1, err))
        return -1;
    ft_phase_end(t->be, FT_PHASE_REDUCE);

    double norm;
    ft_phase_begin(t->be, FT_PHASE_NORM);
    if (ft_engine_grad_norm(t->engine, &norm, err))
        return -1;
    ft_phase_end(t->be, FT_PHASE_NORM);
    /* Clip as torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6) when above. */
    double mult = 1.0;
    if (cfg->grad_clip > 0.0 && norm > cfg->grad_clip)
        mult = cfg->grad_clip / (norm + 1e-6);
    const double lr = ft_schedule_lr(&cfg->optimizer, step, cfg->max_steps);
    st->loss = n_global > 0 ? loss_sum / (double)n_global : 0.0;
    /* A non-finite loss or gradient never reaches the parameters (nor a checkpoint):
     * the step is skipped. Both values are global, so all ranks decide alike. */
    st->skipped = !isfinite(st->loss) || !isfinite(norm);
    ft_watchdog_progress(t->watchdog, "in the optimizer step");
    if (!st->skipped && step + 1 < cfg->max_steps)
        announce_next_lookup(t, step + 1);
    ft_phase_begin(t->be, FT_PHASE_OPTIMIZER);
    if (!st->skipped && ft_engine_step(t->engine, &cfg->optimizer, lr, mult, err))
        return -1;
    ft_phase_end(t->be, FT_PHASE_OPTIMIZER);
    if (ft_phase_timing(t->be))
        t->be->ops->phase_collect(t->be, st->phase_ms);

    st->grad_norm = norm;
    st->lr = lr;
    st->n_targets = (long)n_global;
    st->seconds = ft_world_seconds() - t0;
    st->bytes_sent = t->dev_comm->stats.bytes_sent - sent0;
    st->comm_wait = t->dev_comm->stats.seconds_in_wait - wait0;
    return 0;
}

/* ---------------------------------------------------------------- evaluation */

int ft_trainer_evaluate(ft_trainer *t, const char *path, long max_rows, double *mean_loss,
                        long *n_targets, ft_error *err)
{
    ft_loader_quiesce(t->loader); /* HDF5 is not thread-safe: no read may be in flight */
    ft_dataset ds;
    if (ft_dataset_open(&ds, path, MPI_COMM_WORLD, err))
        return -1;
    int rc = 0;
    if (ds.info.seq_len != t->seq_len)
        rc = ft_fail(err, "%s: seq_len %d differs from the training data's %d", path,
                     ds.info.seq_len, t->seq_len);
    const int P = t->comm->size, mb = t->cfg->micro_batch_size, W = t->seq_len + 1;
    int64_t total = ds.info.rows;
    if (max_rows > 0 && max_rows < total)
        total = max_rows;
    double sums[2] = { 0.0, 0.0 }; /* loss sum, target count */
    ft_param_source src = ft_trainer_model_source(t);
    /* Rounds of P*mb rows; rank r takes rows [base + r*mb, base + (r+1)*mb). Every rank
     * joins every round's collective read, with fewer (or no) rows at the end. */
    for (int64_t base = 0; base < total && !rc; base += (int64_t)P * mb) {
        int64_t first = base + (int64_t)t->comm->rank * mb;
        int n = 0;
        int64_t rows[mb];
        for (int j = 0; j < mb && first + j < total; j++)
            rows[n++] = first + j;
        rc = ft_dataset_read_rows(&ds, rows, n, t->tokens, t->loss_mask, t->segment, err);
        if (rc || n == 0)
            continue;
        ft_host_batch b = { .batch = n, .seq_len = t->seq_len, .tokens = t->tokens,
                            .loss_mask = t->loss_mask, .segment = t->segment };
        double ls;
        long nt;
        rc = ft_model_eval_micro(t->model, &src, &b, &ls, &nt, err);
        /* a long evaluation is progress, batch by batch, not a hang */
        ft_watchdog_progress(t->watchdog, "evaluating");
        sums[0] += ls;
        sums[1] += (double)count_targets(t->loss_mask, n, W);
    }
    ft_dataset_close(&ds);
    if (rc)
        return -1;
    if (t->comm->ops->all_reduce_f64_sum(t->comm, sums, 2, err))
        return -1;
    *n_targets = (long)sums[1];
    *mean_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
    return 0;
}
