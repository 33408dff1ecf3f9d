/* Set-up and teardown of a training run: the backend, the checks every rank meets
 * alike before anything is allocated, the engines and the model, their parameters
 * (a resume checkpoint or trainer_load.c), the data loader and the run's outputs. The
 * step and evaluation are in trainer_step.c, the loop in trainer_run.c. */
#include "train/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/agree.h"
#include "comm/world.h"
#include "train/checkpoint.h"
#include "train/ckpt_best.h"
#include "train/ckpt_dir.h"
#include "train/exit_record.h"
#include "train/finite_guard.h"
#include "train/loader.h"
#include "train/metrics.h"
#include "train/mfu.h"
#include "train/plan.h"
#include "train/preflight.h"
#include "train/schedule_meta.h"
#include "train/tensorboard.h"
#include "train/trainer_internal.h"
#include "train/watchdog.h"

/* ---------------------------------------------------------------- set-up */

static int check_batch_geometry(ft_trainer *t, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    const int P = t->comm->size, mb = cfg->micro_batch_size, G = cfg->global_batch_size;
    if (ft_run_config_check_run(cfg, P, err)) {
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG; /* every rank sees the same */
        return -1;
    }
    t->accum = G / (mb * P);
    t->rows_per_rank = mb * t->accum;
    return 0;
}

/* One job per checkpoint_dir: a second job writing the same step files and `latest`
 * would corrupt the first's history. Rank 0 holds the lock; every rank learns. */
static int lock_checkpoint_dir(ft_trainer *t, ft_error *err)
{
    const char *dir = t->cfg->checkpoint_dir;
    int rc = ft_checkpoint_prepare_dir(dir, t->comm, err);
    if (rc)
        return -1;
    /* the lock holder removes an earlier launch's exit record (train/exit_record.h) */
    rc = t->comm->rank == 0 ? ft_ckpt_lock(dir, &t->ckpt_lock_fd, err) ||
                                  ft_exit_record_clear(dir, err)
                            : 0;
    return ft_agree(MPI_COMM_WORLD, rc, err);
}

/* Marks progress and names the set-up phase. Test hook: FTMPI_FAULT=stop:<rank>:<phase>
 * stops that rank (SIGSTOP) as it enters the phase whose name starts with <phase>, as a
 * rank hung on a file system or stopped by hand would be. */
static void enter_phase(ft_trainer *t, const char *phase)
{
    ft_watchdog_progress(t->watchdog, phase);
    const char *f = getenv("FTMPI_FAULT");
    char *rest = NULL;
    if (!f || strncmp(f, "stop:", 5) != 0)
        return;
    const long r = strtol(f + 5, &rest, 10);
    if (r == t->comm->rank && rest && *rest == ':' &&
        strncmp(phase, rest + 1, strlen(rest + 1)) == 0)
        raise(SIGSTOP);
}

/* keep_best: the record of checkpoint_dir/best when resuming (rank 0 reads it, every
 * rank learns the loss, as all decide alike whether an evaluation is a new best). */
static int read_best_eval(ft_trainer *t, bool resumed, ft_error *err)
{
    t->best_eval = INFINITY;
    if (!t->cfg->keep_best || !resumed)
        return 0;
    int rc = 0;
    if (t->comm->rank == 0) {
        char name[512];
        double loss;
        rc = ft_ckpt_best_read(t->cfg->checkpoint_dir, name, sizeof name, &loss, err);
        if (rc == 0)
            t->best_eval = loss;
        rc = rc < 0 ? -1 : 0;
    }
    ft_world_broadcast(MPI_COMM_WORLD, &t->best_eval, sizeof t->best_eval, 0);
    return rc;
}

int ft_trainer_setup(ft_trainer *t, const ft_run_config *cfg, ft_comm *comm, FILE *out,
                     bool eval_only, ft_watchdog *watchdog, ft_startup_timer *startup,
                     ft_error *err)
{
    memset(t, 0, sizeof *t);
    t->watchdog = watchdog; /* main's: set-up is watched too (collective opens, loading) */
    t->ckpt_lock_fd = -1;
    t->cfg = cfg;
    t->comm = comm;
    t->out = comm->rank == 0 ? out : NULL;
    t->startup = startup;

    t->dev_comm = comm;
    if (strcmp(cfg->device, "cpu") == 0) {
        if (ft_backend_cpu_create(&t->be, err))
            return -1;
    } else {
        /* one GPU per rank, chosen by the node-local rank */
        if (ft_backend_cuda_create(&t->be, comm->local_rank, err) ||
            ft_comm_nccl_create(&t->dev_comm, t->be, err))
            return ft_fail_context(err, "device \"cuda\" on rank %d (node-local rank %d)",
                                   comm->rank, comm->local_rank);
    }
    t->be->time_phases = cfg->profile_phases;
    ft_startup_mark(t->startup, "backend");
    enter_phase(t, "opening model.weights and data.train (collective)");
    /* start-up facts every rank meets alike end the job with one line and exit 2 */
    if (ft_agree_config(MPI_COMM_WORLD, ft_trainer_resolve_model_shape(t, err), err) ||
        check_batch_geometry(t, err))
        return -1;
    /* Collective open for validation and the file's description; the rows themselves
     * are read by the loader through its own handle. */
    if (ft_dataset_read_info(cfg->train_data, MPI_COMM_WORLD, "data.train", &t->train_info, err))
        return -1;
    const ft_dataset_info *di = &t->train_info;
    if (ft_tok_identity_meet(&t->tok, cfg, "data.train", cfg->train_data,
                             di->tokenizer_fingerprint, err))
        return -1;
    if (di->vocab_size > t->layout.config.vocab_size) {
        ft_fail(err, "%s: dataset vocab_size %d exceeds the model's %d (wrong tokenizer for "
                "this model?)", cfg->train_data, di->vocab_size, t->layout.config.vocab_size);
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG; /* every rank read the same attributes */
        return -1;
    }
    t->seq_len = di->seq_len;
    if (t->seq_len > t->layout.config.max_position_embeddings) {
        /* the config's (or the weights file's) fault, found against the data */
        if (cfg->model_weights)
            ft_fail(err, "%s: seq_len %d exceeds the max_position_embeddings %d of model.weights "
                    "%s; use data made with a shorter --seq-len", cfg->train_data, t->seq_len,
                    t->layout.config.max_position_embeddings, cfg->model_weights);
        else
            ft_fail(err, "%s: %d is below data.train's seq_len %d (%s); raise it or use shorter "
                    "rows", ft_run_config_where(cfg, "model.max_position_embeddings"),
                    t->layout.config.max_position_embeddings, t->seq_len, cfg->train_data);
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG;
        return -1;
    }

    ft_startup_mark(t->startup, "open");
    enter_phase(t, "checking data.eval, final_weights, checkpoint_dir");
    if ((cfg->eval_data && ft_preflight_eval_data(t, err)) ||
        (cfg->final_weights && ft_preflight_final_weights(t, err)))
        return -1;

    ft_engine_options eo = ft_run_engine_options(cfg, t->seq_len);
    ft_model_options mo = ft_run_model_options(cfg, t->seq_len, (double)t->be->memory_total);
    char *resume_path = NULL;
    if ((cfg->checkpoint_dir && !eval_only && lock_checkpoint_dir(t, err)) ||
        ft_agree_config(MPI_COMM_WORLD, ft_checkpoint_resolve(cfg, &resume_path, err), err))
        return -1;
    if (t->be->host_memory && ft_preflight_host_memory(t, err))
        return -1;
    ft_startup_mark(t->startup, "checks");
    enter_phase(t, "creating the engine and the model");
    ft_engine_options base_eo = eo;
    base_eo.frozen = true;
    if (ft_lora_enabled(&t->lora)) {
        mo.lora = &t->lora;
        mo.adapter_layout = &t->adapter_layout;
        mo.lora_dropout_seed = (uint64_t)cfg->seed;
    }
    int rc = (ft_lora_enabled(&t->lora) &&
              ft_engine_create(&t->base, &t->layout, t->be, t->dev_comm, &base_eo, err)) ||
             ft_engine_create(&t->engine, t->train_layout, t->be, t->dev_comm, &eo, err) ||
             ft_model_create(&t->model, &t->layout, t->be, &mo, err);
    if (!rc && t->base) {
        const ft_param_source adapters = ft_engine_param_source(t->engine);
        ft_model_set_adapters(t->model, &adapters);
    }
    rc = ft_agree(MPI_COMM_WORLD, rc, err); /* no rank may go on alone into the loads */
    if (!rc && t->base) { /* the frozen model, whether the adapters resume or start */
        enter_phase(t, "loading model.weights or initializing the frozen model (collective)");
        rc = ft_agree_config(MPI_COMM_WORLD, ft_trainer_load_model_weights(t, t->base, err), err);
        /* a NaN in the base makes every step NaN, whatever the adapters (finite_guard.h) */
        if (!rc && cfg->model_weights)
            rc = ft_guard_base_after_load(t->base, &t->layout, cfg->model_weights,
                                          cfg->allow_nonfinite, t->out, err);
    }
    const bool resumed = resume_path != NULL;
    ft_startup_mark(t->startup, "allocate");
    if (!rc && resume_path) {
        ft_ckpt_position pos;
        bool direct = false;
        const double t0 = ft_world_seconds();
        enter_phase(t, "loading the resume checkpoint (collective)");
        rc = ft_agree_config(MPI_COMM_WORLD,
                             ft_checkpoint_load(resume_path, t->train_layout, t->engine,
                                                t->base ? &t->lora : NULL, comm, &pos,
                                                cfg->direct_io, &direct, err),
                             err) ||
             ft_tok_identity_meet(&t->tok, cfg, "the resume checkpoint", resume_path,
                                  pos.tokenizer_fingerprint, err);
        t->start_step = pos.step;
        t->sample_base = pos.data_position;
        if (!rc && t->out) {
            char io[96];
            ft_trainer_io_summary(io, sizeof io, resume_path, ft_world_seconds() - t0, direct);
            fprintf(t->out, "ftmpi: resumed from %s at step %ld (read in %s)\n", resume_path,
                    pos.step, io);
            char note[1024];
            if (ft_schedule_change_note(note, sizeof note, &pos.schedule, cfg, pos.step))
                fprintf(t->out, "%s\n", note);
        }
        if (rc)
            ft_fail_context(err, "resume");
        ft_startup_mark(t->startup, "resume");
    } else if (!rc) {
        enter_phase(t, "loading model.weights or initializing (collective)");
        rc = ft_agree_config(MPI_COMM_WORLD, ft_trainer_load_parameters(t, err), err);
        const char *phase = cfg->model_weights ? "load" : "init";
        ft_startup_mark(t->startup, phase);
        double values, placing;
        ft_engine_fill_seconds(t->engine, &values, &placing);
        char detail[64];
        snprintf(detail, sizeof detail, "values %.1f s, placing %.1f s", values, placing);
        ft_startup_detail(t->startup, phase, detail);
    }
    t->last_ckpt_step = !rc && resume_path ? t->start_step : -1;
    /* what the trained engine was loaded from: the resume checkpoint, model.weights, or with
     * LoRA the adapter directory (model.weights went into the base, checked above) */
    const bool from_adapter_dir = !resume_path && t->base && cfg->model_adapter;
    const char *loaded = resume_path ? resume_path
                         : t->base   ? cfg->model_adapter
                                     : cfg->model_weights;
    if (!rc && from_adapter_dir) { /* never train from NaN (finite_guard.h) */
        rc = ft_guard_adapter_after_load(t->engine, t->train_layout, cfg->model_adapter,
                                         &t->layout.config, cfg->allow_nonfinite, t->out, err);
        ft_startup_mark(t->startup, "finite");
    } else if (!rc && loaded) {
        rc = ft_guard_after_load(t->engine, t->train_layout, loaded, cfg->allow_nonfinite, t->out,
                                 &t->last_ckpt_step, err);
        ft_startup_mark(t->startup, "finite");
    }
    free(resume_path);
    if (rc)
        return -1;
    enter_phase(t, "starting the data loader");
    if (ft_data_order_init(&t->order, di->rows, (uint64_t)cfg->seed, true, err) ||
        ft_loader_create(&t->loader, cfg->train_data, t->rows_per_rank, t->seq_len + 1,
                         cfg->data_prefetch, err))
        return -1;
    const size_t W = (size_t)t->seq_len + 1, n = (size_t)t->rows_per_rank * W;
    t->tokens = malloc(n * sizeof *t->tokens);
    t->loss_mask = malloc(n * sizeof *t->loss_mask);
    t->segment = malloc(n * sizeof *t->segment);
    if (!t->tokens || !t->loss_mask || !t->segment)
        return ft_fail(err, "out of host memory for the batch buffers");
    if (cfg->log_ranks && ft_trainer_log_rank_placement(t, err))
        return -1;
    /* LoRA: the frozen matmuls run forward and input-gradient only (4 N), the adapters
     * forward and both gradients (6 N_adapters) */
    t->flops_per_token = t->base ? 4.0 * (double)ft_mfu_matmul_params(&t->layout) +
                                       6.0 * (double)t->adapter_layout.total_numel
                                 : 6.0 * (double)ft_mfu_matmul_params(&t->layout);
    t->flops_per_key = ft_mfu_flops_per_key(&t->layout.config);
    ft_peak peak;
    ft_mfu_choose_peak(cfg->peak_tflops, t->be->host_memory, t->be->device_name, cfg->numerics.weights,
                       &peak);
    t->peak_flops = peak.flops;
    if (comm->rank == 0 && cfg->metrics_file && !(t->metrics = ft_metrics_open(cfg->metrics_file)))
        return ft_fail(err, "metrics_file %s: cannot open for appending", cfg->metrics_file);
    const bool terminal = comm->rank == 0 && ft_progress_stderr_is_terminal();
    ft_progress_init(&t->progress, t->out,
                     ft_progress_choose(cfg->progress, terminal, cfg->progress_every),
                     cfg->progress_every, ft_world_seconds());
    if (ft_agree(MPI_COMM_WORLD, comm->rank == 0 && cfg->tensorboard_dir && !eval_only
                                     ? ft_tb_open(&t->tb, cfg->tensorboard_dir, err) : 0, err) ||
        ft_agree(MPI_COMM_WORLD, read_best_eval(t, resumed, err), err))
        return -1;
    ft_startup_mark(t->startup, "loader");
    ft_trainer_print_startup(t);
    ft_trainer_print_mfu_basis(t, &peak);
    return 0;
}

void ft_trainer_free(ft_trainer *t)
{
    if (t->ckpt_lock_fd >= 0)
        close(t->ckpt_lock_fd);
    ft_metrics_finish(t->metrics, NULL);
    ft_tb_close(t->tb);
    ft_loader_free(t->loader);
    ft_model_free(t->model);
    ft_engine_free(t->engine);
    ft_engine_free(t->base);
    ft_data_order_free(&t->order);
    ft_model_layout_free(&t->layout);
    ft_model_layout_free(&t->adapter_layout);
    if (t->dev_comm && t->dev_comm != t->comm)
        ft_comm_destroy(t->dev_comm);
    free(t->tokens);
    free(t->loss_mask);
    free(t->segment);
    ft_backend_destroy(t->be);
    memset(t, 0, sizeof *t);
}
