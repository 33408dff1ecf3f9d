#include "train/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/phase_time.h"
#include "config/config_lora.h"
#include "io/peft_adapter.h"
#include "io/weights_identity.h"
#include "io/weights.h"
#include "optim/schedule.h"
#include "util/durable.h"
#include "util/units.h"
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
#include "train/run_length.h"
#include "train/signals.h"
#include "train/step_phases.h"
#include "train/tensorboard.h"
#include "train/watchdog.h"
#include "train/weights_out.h"

static double now_seconds(void) { return ft_world_seconds(); }

/* "2.10s, 4.56 GB at 2.17 GB/s, O_DIRECT": a checkpoint transfer for the log line. */
static void io_summary(char *buf, size_t len, const char *path, double seconds, bool direct)
{
    struct stat st;
    const double gb = stat(path, &st) == 0 ? (double)st.st_size / 1e9 : 0.0;
    snprintf(buf, len, "%.2fs, %.2f GB at %.2f GB/s, %s", seconds, gb,
             seconds > 0 ? gb / seconds : 0.0, direct ? "O_DIRECT" : "page cache");
}

/* ---------------------------------------------------------------- set-up */

static int resolve_model_shape(ft_trainer *t, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    ft_model_config mc = cfg->model;
    if (cfg->model_weights) {
        ft_h5file f;
        if (ft_h5_open(&f, cfg->model_weights, MPI_COMM_WORLD, err))
            return ft_fail_context(err, "model.weights");
        char fp[FT_TOK_FINGERPRINT_LEN];
        int rc = ft_h5_check_kind(&f, "weights", err) || ft_weights_read_config(&f, &mc, err) ||
                 ft_tok_fingerprint_read(&f, fp, err) ||
                 ft_tok_identity_meet(&t->tok, cfg, "model.weights", cfg->model_weights, fp, err);
        ft_h5_close(&f, NULL);
        if (rc)
            return -1;
    }
    t->train_layout = &t->layout;
    if (ft_model_layout_build(&t->layout, &mc, err))
        return -1;
    if (ft_run_config_lora(cfg, &mc, &t->lora, err) ||
        ft_run_config_lora_outputs(cfg, &t->lora, err))
        return -1;
    if (!ft_lora_enabled(&t->lora))
        return 0;
    t->train_layout = &t->adapter_layout;
    return ft_lora_layout_build(&t->adapter_layout, &mc, &t->lora, err);
}

ft_param_source ft_trainer_model_source(ft_trainer *t)
{
    return ft_engine_param_source(t->base ? t->base : t->engine);
}

/* The model's weights into e (the frozen base with LoRA): model.weights, or the
 * seeded random initialisation. */
static int load_model_weights(ft_trainer *t, ft_engine *e, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    if (!cfg->model_weights)
        return ft_engine_init_random(e, (uint64_t)cfg->seed, cfg->init_std, err);
    ft_h5file f;
    if (ft_h5_open(&f, cfg->model_weights, MPI_COMM_WORLD, err))
        return -1;
    if (cfg->direct_io)
        ft_h5_attach_raw(&f, MPI_COMM_WORLD, false);
    int rc = ft_weights_check_tensors(&f, "/model", &t->layout, err) ||
             ft_engine_load(e, &f, "/model", err);
    /* LoRA checkpoints name their base by content; a file without content hashes (not
     * written by ftmpi) has no identity, and its checkpoints are checked by shape only */
    ft_error no_identity;
    if (!rc && e == t->base &&
        ft_weights_identity(&f, "/model", &t->layout, t->base_hash, &no_identity))
        t->base_hash[0] = '\0';
    ft_h5_close(&f, NULL);
    return rc ? -1 : 0;
}

/* The trained parameters of a fresh run: the model, or with LoRA the adapters (PEFT's
 * initialisation from the seed: A uniform, B zero). */
static int peft_fill(void *ctx, const ft_unit_layout *u, size_t begin, size_t end, float *dst,
                     ft_error *err)
{
    return ft_peft_adapter_read_range(ctx, u, begin, end, dst, err);
}

/* The adapters of a PEFT directory (model.adapter), checked against the lora group. */
static int load_adapter_dir(ft_trainer *t, ft_error *err)
{
    const char *dir = t->cfg->model_adapter;
    ft_peft_adapter a;
    if (ft_peft_adapter_open(&a, dir, &t->layout.config, err))
        return ft_fail_context(err, "model.adapter");
    int rc = ft_peft_adapter_check_config(&a, &t->lora, err);
    if (rc)
        ft_fail_context(err, "%s", ft_run_config_where(t->cfg, "model.adapter"));
    rc = rc || ft_engine_init_from(t->engine, peft_fill, &a, err);
    ft_peft_adapter_close(&a);
    return rc ? -1 : 0;
}

static int load_parameters(ft_trainer *t, ft_error *err)
{
    if (!t->base)
        return load_model_weights(t, t->engine, err);
    if (t->cfg->model_adapter)
        return load_adapter_dir(t, err);
    return ft_engine_init_random(t->engine, (uint64_t)t->cfg->seed, 0.0, err);
}

/* Engine memory of the run: the trained engine's and the frozen base's. */
static ft_engine_memory run_memory(ft_trainer *t)
{
    ft_engine_memory m = ft_engine_memory_usage(t->engine);
    if (t->base) {
        const ft_engine_memory b = ft_engine_memory_usage(t->base);
        m.params += b.params;
        m.grads += b.grads;
        m.optimizer += b.optimizer;
        m.gathered += b.gathered;
        m.scratch += b.scratch;
        m.host += b.host;
    }
    return m;
}

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

/* Memory per rank in the log, each figure once in a readable unit; the exact bytes go
 * to the metrics file ("memory" record) for scripts and tests. */
static void print_memory(ft_trainer *t, const ft_engine_memory *mem)
{
    const size_t act = ft_model_activation_bytes(t->model);
    const double v[] = { (double)mem->params, (double)mem->grads, (double)mem->optimizer,
                         (double)mem->gathered, (double)mem->scratch, (double)act,
                         (double)mem->host };
    static const char *const keys[] = { "params", "grads", "optimizer", "gathered",
                                        "staging", "activations", "host" };
    char h[7][32], ckpt[80];
    for (int i = 0; i < 7; i++)
        ft_format_bytes(h[i], sizeof h[i], v[i]);
    const int L = t->layout.config.num_hidden_layers;
    const int k = ft_model_checkpointed_blocks(t->cfg->activation_checkpointing,
                                               t->cfg->checkpoint_layers, L);
    const char *kept = t->cfg->checkpoint_keep_attention ? ", attention kept" : "";
    if (k == 0)
        snprintf(ckpt, sizeof ckpt, "off");
    else if (k < L)
        snprintf(ckpt, sizeof ckpt, "on for blocks 0-%d of %d%s", k - 1, L, kept);
    else
        snprintf(ckpt, sizeof ckpt, "on%s", kept);
    fprintf(t->out,
            "ftmpi: memory per rank: params %s, grads %s, optimizer %s, gathered units %s, "
            "staging %s, activations %s (checkpointing %s)\n",
            h[0], h[1], h[2], h[3], h[4], h[5], ckpt);
    if (t->cfg->offload_optimizer)
        fprintf(t->out, "ftmpi: optimizer offloaded: %s of master weights and moments in "
                        "host memory\n", h[6]);
    ft_metrics_values(t->metrics, "memory", 0, keys, v, 7);
}

static void print_startup(ft_trainer *t)
{
    if (!t->out)
        return;
    const ft_model_config *c = &t->layout.config;
    const ft_run_config *cfg = t->cfg;
    ft_engine_memory mem = run_memory(t);
    fprintf(t->out,
            "ftmpi: model %s, %lld params (%d layers, hidden %d, ffn %d, heads %d/%d kv, "
            "head_dim %d, vocab %d%s)\n",
            ft_model_family_of(c)->name, ft_model_config_param_count(c), c->num_hidden_layers,
            c->hidden_size,
            c->intermediate_size, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
            c->vocab_size, c->tie_word_embeddings ? ", tied" : "");
    fprintf(t->out,
            "ftmpi: %d rank%s, backend %s, collectives %s, zero_stage %d, global batch %d = %d "
            "ranks x micro %d x accum %d, seq_len %d, %ld tokens/step\n",
            t->comm->size, t->comm->size > 1 ? "s" : "", t->be->name,
            t->dev_comm ? t->dev_comm->name : t->comm->name, cfg->zero_stage,
            cfg->global_batch_size, t->comm->size, cfg->micro_batch_size, t->accum, t->seq_len,
            (long)cfg->global_batch_size * t->seq_len);
    if (t->base) {
        char targets[256];
        ft_lora_targets_string(c, &t->lora, targets, sizeof targets);
        fprintf(t->out, "ftmpi: LoRA rank %d, alpha %g (scale %g) on %s: %zu trained parameters "
                        "(%.3f %% of the model's), the model frozen\n",
                t->lora.rank, t->lora.alpha, ft_lora_scale(&t->lora), targets,
                t->adapter_layout.total_numel,
                100.0 * (double)t->adapter_layout.total_numel / (double)t->layout.total_numel);
    }
    print_memory(t, &mem);
    fprintf(t->out,
            "ftmpi: sharding: %d units, %zu elements padded to %zu (%zu in the embedding, %zu "
            "per block)\n",
            t->layout.n_units, t->layout.total_numel,
            ft_engine_padded_total(t->base ? t->base : t->engine),
            ft_engine_padded_unit(t->base ? t->base : t->engine, 0),
            ft_engine_padded_unit(t->base ? t->base : t->engine, ft_layout_block_unit(0)));
    if (t->base)
        fprintf(t->out, "ftmpi: sharding the adapters: %d units, %zu elements padded to %zu\n",
                t->adapter_layout.n_units, t->adapter_layout.total_numel,
                ft_engine_padded_total(t->engine));
    fflush(t->out);
}

/* Once: what MFU divides by and where the peak comes from (train/mfu.h), and the
 * start-up phases so far. */
static void print_mfu_basis(ft_trainer *t, const ft_peak *peak)
{
    if (!t->out)
        return;
    const ft_model_config *c = &t->layout.config;
    const double T = t->seq_len, W = c->sliding_window;
    /* visible keys per query of a full-length causal row, for the reader's estimate */
    const double keys = W > 0 && W < T ? W - W * (W - 1) / (2 * T) : (T + 1) / 2;
    char basis[128];
    if (t->base) /* LoRA: the frozen matmuls have no weight gradient */
        snprintf(basis, sizeof basis, "4 x %lld frozen matmul params + 6 x %zu adapter params",
                 ft_mfu_matmul_params(&t->layout), t->adapter_layout.total_numel);
    else
        snprintf(basis, sizeof basis, "6 x %lld matmul params", ft_mfu_matmul_params(&t->layout));
    fprintf(t->out,
            "ftmpi: model FLOPs per token %.3g = %s + %.3g per visible key (%.0f keys a query "
            "in a one-document row)\n",
            t->flops_per_token + t->flops_per_key * keys, basis, t->flops_per_key, keys);
    if (peak->flops > 0)
        fprintf(t->out, "ftmpi: MFU peak %.4g TFLOP/s per rank (%s)\n", peak->flops / 1e12,
                peak->source);
    else
        fprintf(t->out, "ftmpi: %s\n", peak->source);
    if (t->startup) {
        char line[512];
        ft_startup_format(t->startup, line, sizeof line);
        fprintf(t->out, "ftmpi: %s\n", line);
    }
    fflush(t->out);
}

/* One line per rank, printed in rank order by rank 0. */
static int log_rank_placement(ft_trainer *t, ft_error *err)
{
    char line[400], host[256];
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    char dev[32];
    if (t->be->device >= 0)
        snprintf(dev, sizeof dev, "%s:%d", t->be->name, t->be->device);
    else
        snprintf(dev, sizeof dev, "%s (host)", t->be->name);
    snprintf(line, sizeof line, "ftmpi: rank %d of %d on %s, node-local rank %d of %d, device %s",
             t->comm->rank, t->comm->size, host, t->comm->local_rank, t->comm->local_size, dev);
    char *all = t->comm->rank == 0 ? malloc(sizeof line * (size_t)t->comm->size) : NULL;
    if (t->comm->rank == 0 && !all)
        return ft_fail(err, "out of host memory");
    ft_world_gather(MPI_COMM_WORLD, line, sizeof line, all, 0);
    if (t->out)
        for (int r = 0; r < t->comm->size; r++)
            fprintf(t->out, "%s\n", all + (size_t)r * sizeof line);
    free(all);
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
    if (ft_agree_config(MPI_COMM_WORLD, resolve_model_shape(t, err), err) ||
        check_batch_geometry(t, err))
        return -1;
    /* Collective open for validation and the file's description; the rows themselves
     * are read by the loader through its own handle. */
    ft_dataset train;
    const int opened = ft_dataset_open(&train, cfg->train_data, MPI_COMM_WORLD, err);
    /* every rank opens the same file: one line for all, no abort (ft_agree) */
    if (ft_agree_config(MPI_COMM_WORLD, opened, err)) {
        if (opened == 0)
            ft_dataset_close(&train);
        return ft_fail_context(err, "data.train");
    }
    t->train_info = train.info;
    ft_dataset_close(&train);
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

    ft_engine_options eo = ft_run_engine_options(cfg);
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
        rc = ft_agree_config(MPI_COMM_WORLD, load_model_weights(t, t->base, err), err);
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
        const double t0 = now_seconds();
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
            io_summary(io, sizeof io, resume_path, now_seconds() - t0, direct);
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
        rc = ft_agree_config(MPI_COMM_WORLD, load_parameters(t, err), err);
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
    if (cfg->log_ranks && log_rank_placement(t, err))
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
                     cfg->progress_every, now_seconds());
    if (ft_agree(MPI_COMM_WORLD, comm->rank == 0 && cfg->tensorboard_dir && !eval_only
                                     ? ft_tb_open(&t->tb, cfg->tensorboard_dir, err) : 0, err) ||
        ft_agree(MPI_COMM_WORLD, read_best_eval(t, resumed, err), err))
        return -1;
    ft_startup_mark(t->startup, "loader");
    print_startup(t);
    print_mfu_basis(t, &peak);
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

int ft_trainer_step(ft_trainer *t, long step, ft_step_stats *st, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    const double t0 = now_seconds();
    const uint64_t sent0 = t->dev_comm->stats.bytes_sent;
    const double wait0 = t->dev_comm->stats.seconds_in_wait;
    const int R = t->rows_per_rank, W = t->seq_len + 1;

    ft_watchdog_progress(t->watchdog, "reading the step's rows");
    const double read0 = now_seconds();
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
    st->data_wait = now_seconds() - read0;
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
        if (ft_model_train_micro(t->model, &src, &b, grad_scale, &ls, &nt, err))
            return ft_fail_context_path(err, cfg->train_data);
        if (ft_engine_status(t->engine, err))
            return -1;
        loss_sum += ls;
    }
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
    ft_phase_begin(t->be, FT_PHASE_OPTIMIZER);
    if (!st->skipped && ft_engine_step(t->engine, &cfg->optimizer, lr, mult, err))
        return -1;
    ft_phase_end(t->be, FT_PHASE_OPTIMIZER);
    if (ft_phase_timing(t->be))
        t->be->ops->phase_collect(t->be, st->phase_ms);

    st->grad_norm = norm;
    st->lr = lr;
    st->n_targets = (long)n_global;
    st->seconds = now_seconds() - t0;
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
    const double t0 = now_seconds();
    bool direct = false;
    if (ft_checkpoint_save(cfg->checkpoint_dir, cfg, t->train_layout, t->engine, t->comm, &pos,
                           t->seq_len, &direct, err))
        return ft_fail_context(err, "checkpoint at step %ld", steps_done);
    if (t->out) {
        char path[1100], io[96];
        ft_ckpt_step_path(path, sizeof path, cfg->checkpoint_dir, steps_done);
        io_summary(io, sizeof io, path, now_seconds() - t0, direct);
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
    const double start = now_seconds();
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
        const double elapsed = now_seconds() - start;
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
        ft_progress_update(&t->progress, &r, logged, now_seconds());
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
        const double trained_s = now_seconds() - start;
        if (ls.seconds_reading > 0 && trained_s > 0)
            fprintf(t->out, "ftmpi: data loader (rank 0): %.0f rows/s when reading, training "
                            "consumed %.1f rows/s: %.0fx the need; %.3f s waiting for data\n",
                    ls.rows_read / ls.seconds_reading, ls.rows_read / trained_s,
                    trained_s / ls.seconds_reading, ls.seconds_waited);
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
