/* The training loop of a run: steps, their log lines and records, periodic evaluation
 * and checkpoints, keep_best, stopping on a signal or a failing guard, and what the run
 * writes at its end. */
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>

#include "backend/phase_time.h"
#include "comm/agree.h"
#include "comm/world.h"
#include "train/checkpoint.h"
#include "train/ckpt_best.h"
#include "train/ckpt_dir.h"
#include "train/exit_record.h"
#include "train/finite_guard.h"
#include "train/loader.h"
#include "train/metrics.h"
#include "train/run_length.h"
#include "train/signals.h"
#include "train/step_phases.h"
#include "train/tensorboard.h"
#include "train/trainer_internal.h"
#include "train/watchdog.h"
#include "train/weights_out.h"
#include "util/units.h"

/* ---------------------------------------------------------------- output */

/* Writes the weights file `path` (train/weights_out.h). */
static int save_weights(ft_trainer *t, const char *path, ft_error *err)
{
    ft_loader_quiesce(t->loader);
    if (ft_guard_before_write(t->engine, &t->layout, path, err)) /* never NaN in a file */
        return -1;
    return ft_weights_out_save(path, &t->layout, t->tok.fp, t->engine, t->cfg->direct_io,
                               t->comm->rank, err);
}

/* Checkpoint after `steps_done` optimizer steps. */
static int save_checkpoint(ft_trainer *t, long steps_done, ft_error *err)
{
    ft_loader_quiesce(t->loader);
    const ft_run_config *cfg = t->cfg;
    ft_ckpt_position pos = { .step = steps_done,
                             .optimizer_step = ft_engine_step_count(t->engine),
                             .data_position = t->sample_base +
                                              (steps_done - t->start_step) *
                                                  (int64_t)cfg->global_batch_size };
    snprintf(pos.tokenizer_fingerprint, sizeof pos.tokenizer_fingerprint, "%s", t->tok.fp);
    snprintf(pos.base_hash, sizeof pos.base_hash, "%s", t->base_hash);
    const double t0 = ft_world_seconds();
    bool direct = false;
    if (ft_checkpoint_save(cfg->checkpoint_dir, cfg, t->train_layout, t->engine, t->comm, &pos,
                           t->seq_len, &direct, err))
        return ft_fail_context(err, "checkpoint at step %ld", steps_done);
    if (t->out) {
        char path[1100], io[96];
        ft_ckpt_step_path(path, sizeof path, cfg->checkpoint_dir, steps_done);
        ft_trainer_io_summary(io, sizeof io, path, ft_world_seconds() - t0, direct);
        fprintf(t->out, "ftmpi: checkpoint %s written in %s\n", path, io);
        fflush(t->out);
    }
    return 0;
}

/* ---------------------------------------------------------------- the loop */

static double peak_mib(ft_trainer *t)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double v[1] = { (double)t->be->peak_bytes / (1024.0 * 1024.0) };
    /* With tensors in host memory the process high-water mark is the honest figure. */
    if (t->be->host_memory)
        v[0] = (double)ru.ru_maxrss / 1024.0;
    t->comm->ops->all_reduce_f64_max(t->comm, v, 1, NULL);
    return v[0];
}

static void log_step(ft_trainer *t, const ft_step_record *r, double comm_wait_s)
{
    ft_progress_clear(&t->progress);
    char eta[32], mem[32], comm[32], epoch[48] = "", mfu[32];
    ft_format_duration(eta, sizeof eta, r->eta_s);
    ft_format_bytes(mem, sizeof mem, r->peak_mem_mib * 1024.0 * 1024.0);
    ft_format_bytes(comm, sizeof comm, (double)r->comm_bytes); /* exact: the metrics file */
    if (r->num_epochs > 0)
        snprintf(epoch, sizeof epoch, " | epoch %.2f/%g", r->epoch, r->num_epochs);
    /* "-" where no peak is known (train/mfu.h) */
    if (isfinite(r->mfu))
        snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * r->mfu);
    else
        snprintf(mfu, sizeof mfu, "-");
    fprintf(t->out,
            "step %6ld/%ld%s | loss %.4f | lr %.3e | grad_norm %.4f | tok/s %.0f | mfu %s | "
            "step %.3fs | data %.3fs | elapsed %.1fs | eta %s | peak_mem %s | "
            "comm_wait %.3fs | comm %s\n",
            r->step, r->max_steps, epoch, r->loss, r->lr, r->grad_norm, r->tokens_per_s,
            mfu, r->step_s, r->data_wait_s, r->elapsed_s, eta, mem, comm_wait_s, comm);
    fflush(t->out);
}

/* keep_best: an evaluation below every earlier one makes its step's checkpoint the
 * best (written now when the step has none) and records it in checkpoint_dir/best,
 * which pruning spares. The loss is global, so every rank decides alike. */
static int keep_best_after_eval(ft_trainer *t, long step, double loss, long *last_saved,
                                ft_error *err)
{
    if (!t->cfg->keep_best || !(loss < t->best_eval))
        return 0;
    if (*last_saved != step) {
        if (save_checkpoint(t, step, err))
            return -1;
        *last_saved = t->last_ckpt_step = step;
    }
    const int rc = t->comm->rank == 0 ? ft_ckpt_best_write(t->cfg->checkpoint_dir, step, loss, err)
                                      : 0;
    if (ft_agree(MPI_COMM_WORLD, rc, err))
        return ft_fail_context(err, "keep_best");
    t->best_eval = loss;
    if (t->out) {
        char path[1100];
        ft_ckpt_step_path(path, sizeof path, t->cfg->checkpoint_dir, step);
        fprintf(t->out, "ftmpi: eval loss %.4f at step %ld is the lowest so far: %s is kept as "
                        "the best (keep_best)\n", loss, step, path);
    }
    return 0;
}

static int run_eval(ft_trainer *t, long step, long *last_saved, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    double loss;
    long n;
    ft_watchdog_progress(t->watchdog, "evaluating");
    if (ft_trainer_evaluate(t, cfg->eval_data, cfg->eval_batches * cfg->global_batch_size, &loss,
                            &n, err))
        return ft_fail_context(err, "eval at step %ld", step);
    if (t->out) {
        ft_progress_clear(&t->progress);
        fprintf(t->out, "eval   %6ld | loss %.4f | ppl %.3f | %ld tokens\n", step, loss, exp(loss),
                n);
        fflush(t->out);
    }
    ft_metrics_eval(t->metrics, step, loss, n);
    ft_tb_log_eval(&t->tb, step, loss, t->out);
    if (t->after_eval && t->after_eval(t->after_eval_ctx, t, step, err))
        return ft_fail_context(err, "after the eval at step %ld", step);
    return keep_best_after_eval(t, step, loss, last_saved, err);
}

/* Nonzero on every rank when a stop signal reached any rank. */
static int stop_agreed(ft_trainer *t)
{
    return ft_world_any(MPI_COMM_WORLD, ft_signals_stop_requested());
}

/* For launchers that lose the ranks' exit code (mpirun on SIGTERM): rank 0 records it
 * after the signal's checkpoint (train/exit_record.h). */
static int record_signal_exit(ft_trainer *t, long step, ft_error *err)
{
    const char *dir = t->cfg->checkpoint_dir;
    if (!dir || t->comm->rank != 0)
        return 0;
    return ft_exit_record_write(dir, t->stopped_by_signal, step, err);
}

int ft_trainer_run(ft_trainer *t, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    const double start = ft_world_seconds();
    const double tokens_per_step = (double)cfg->global_batch_size * t->seq_len;
    int skipped_total = 0;
    long last_saved = -1;
    /* a signal during start-up (handlers are in place from main() on): nothing trained,
     * nothing new to save; the documented codes, not the shell's 128 + signal */
    if (stop_agreed(t)) {
        t->stopped_by_signal = cfg->checkpoint_dir ? FT_EXIT_SIGNALLED : FT_EXIT_SIGNALLED_NO_CKPT;
        if (t->out)
            fprintf(t->out, "ftmpi: stop signal during start-up: nothing trained; exiting with "
                            "%d\n", t->stopped_by_signal);
        return record_signal_exit(t, t->start_step, err);
    }
    if (t->start_step >= cfg->max_steps && t->out)
        fprintf(t->out, "ftmpi: checkpoint is at step %ld of max_steps %ld: nothing to do\n",
                t->start_step, cfg->max_steps);
    for (long step = t->start_step; step < cfg->max_steps; step++) {
        ft_step_stats st;
        if (ft_trainer_step(t, step, &st, err))
            return ft_fail_context(err, "step %ld", step + 1);
        ft_watchdog_progress(t->watchdog, "logging and checkpointing");
        if (st.n_targets == 0 && t->no_target_steps++ == 0 && t->out)
            fprintf(t->out, "ftmpi: step %ld: no target token in the global batch (loss_mask "
                            "0 in all its rows): the step learns nothing; check the data's "
                            "loss_mask\n", step + 1);
        if (st.skipped) {
            skipped_total++;
            if (t->out)
                fprintf(t->out, "ftmpi: step %ld: loss %g, grad norm %g: not finite, update "
                                "skipped (%d of max_nan_skips %d)\n",
                        step + 1, st.loss, st.grad_norm, skipped_total, cfg->max_nan_skips);
            if (skipped_total > cfg->max_nan_skips)
                return ft_guard_nan_stop(err, step + 1, st.loss, st.grad_norm, skipped_total,
                                         cfg->max_nan_skips, cfg->checkpoint_dir, t->last_ckpt_step);
        }
        if (ft_collapse_step(&t->collapse, st.loss, st.grad_norm, t->layout.config.vocab_size,
                             cfg->collapse_steps))
            return ft_guard_collapsed(t->out, step + 1, cfg->collapse_steps, st.loss,
                                      &t->stopped_by_signal);
        const int last = step + 1 == cfg->max_steps;
        const double elapsed = ft_world_seconds() - start;
        ft_step_record r = {
            .step = step + 1, .max_steps = cfg->max_steps, .loss = st.loss, .lr = st.lr,
            .grad_norm = st.grad_norm, .tokens_per_s = tokens_per_step / st.seconds,
            .step_s = st.seconds, .data_wait_s = st.data_wait, .comm_wait_s = st.comm_wait,
            .elapsed_s = elapsed, .comm_bytes = (unsigned long long)st.bytes_sent,
            .skipped = st.skipped, .num_epochs = cfg->num_epochs,
            .epoch = ft_run_length_epoch(t->sample_base + (step + 1 - t->start_step) *
                                                              (int64_t)cfg->global_batch_size,
                                         t->train_info.rows),
            .eta_s = elapsed / (double)(step + 1 - t->start_step) *
                     (double)(cfg->max_steps - step - 1),
        };
        const double step_flops = tokens_per_step * t->flops_per_token +
                                  (double)st.visible_keys * t->flops_per_key;
        r.mfu = t->peak_flops > 0 ? step_flops / (st.seconds * t->peak_flops * t->comm->size)
                                  : NAN;
        const bool logged =
            cfg->log_every > 0 && ((step + 1) % cfg->log_every == 0 || last || step == 0);
        if (logged) {
            r.peak_mem_mib = peak_mib(t);
            if (t->out)
                log_step(t, &r, st.comm_wait);
            if (ft_phase_timing(t->be) && t->comm->rank == 0)
                ft_step_phases_report(t->out, t->metrics, step + 1, st.phase_ms, st.seconds,
                                      t->be->device >= 0);
        } else {
            r.peak_mem_mib = NAN;
        }
        ft_metrics_step(t->metrics, &r);
        ft_tb_log_step(&t->tb, &r, t->out);
        ft_progress_update(&t->progress, &r, logged, ft_world_seconds());
        if (cfg->checkpoint_dir && cfg->save_every > 0 && (step + 1) % cfg->save_every == 0) {
            if (save_checkpoint(t, step + 1, err))
                return -1;
            last_saved = t->last_ckpt_step = step + 1;
        }
        if (stop_agreed(t)) {
            if (cfg->checkpoint_dir && last_saved != step + 1 && save_checkpoint(t, step + 1, err))
                return -1;
            t->stopped_by_signal = cfg->checkpoint_dir ? FT_EXIT_SIGNALLED : FT_EXIT_SIGNALLED_NO_CKPT;
            if (t->out)
                fprintf(t->out, "ftmpi: stop signal: %s after step %ld; exiting with %d\n",
                        cfg->checkpoint_dir ? "checkpointed" : "no checkpoint_dir, nothing saved,",
                        step + 1, t->stopped_by_signal);
            return record_signal_exit(t, step + 1, err);
        }
        if (cfg->eval_data && cfg->eval_every > 0 && ((step + 1) % cfg->eval_every == 0 || last) &&
            run_eval(t, step + 1, &last_saved, err))
            return -1;
    }
    ft_progress_clear(&t->progress);
    if (cfg->checkpoint_dir && t->start_step < cfg->max_steps && last_saved != cfg->max_steps &&
        save_checkpoint(t, cfg->max_steps, err))
        return -1;
    double peak[1] = { (double)t->be->peak_bytes };
    if (t->comm->ops->all_reduce_f64_max(t->comm, peak, 1, err))
        return -1;
    if (t->out) {
        char pk[32];
        fprintf(t->out, "ftmpi: peak backend memory per rank: %s (max over ranks)\n",
                ft_format_bytes(pk, sizeof pk, peak[0]));
        static const char *const key[] = { "backend_bytes" }; /* exact, for the planner's test */
        ft_metrics_values(t->metrics, "peak_memory", cfg->max_steps, key, peak, 1);
        ft_loader_stats ls = ft_loader_get_stats(t->loader);
        const double trained_s = ft_world_seconds() - start;
        if (ls.seconds_reading > 0 && trained_s > 0)
            fprintf(t->out, "ftmpi: data loader (rank 0): %.0f rows/s when reading, training "
                            "consumed %.1f rows/s: %.0fx the need; %.3f s waiting for data\n",
                    ls.rows_read / ls.seconds_reading, ls.rows_read / trained_s,
                    trained_s / ls.seconds_reading, ls.seconds_waited);
        const long followed = cfg->max_steps - t->start_step - 1; /* steps after a step */
        if ((ft_engine_beside_compute(t->engine) & FT_ENGINE_BESIDE_LOOKUP) && followed > 0)
            fprintf(t->out, "ftmpi: the next step's embedding rows came before the update in "
                            "%ld of %ld steps (rank 0)\n",
                    ft_engine_lookups_served(t->engine), followed);
    }
    if (cfg->final_weights) {
        if (save_weights(t, cfg->final_weights, err))
            return ft_fail_context(err, "final_weights");
        if (t->out)
            fprintf(t->out, "ftmpi: wrote %s\n", cfg->final_weights);
    }
    /* a metrics_file that lost records fails the run (exit 1), on every rank alike */
    const int mrc = ft_metrics_finish(t->metrics, err);
    t->metrics = NULL;
    return ft_agree(MPI_COMM_WORLD, mrc, err);
}
