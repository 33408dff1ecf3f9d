/* The training run: set-up from a run config, the step loop, evaluation. */
#ifndef FT_TRAIN_TRAINER_H
#define FT_TRAIN_TRAINER_H

#include <stdio.h>

#include "train/tok_check.h"
#include "backend/backend.h"
#include "comm/comm.h"
#include "config/run_config.h"
#include "io/dataset.h"
#include "model/lora.h"
#include "model/model.h"
#include "shard/engine.h"
#include "train/data_order.h"
#include "train/startup_timer.h"
#include "train/progress.h"
#include "train/finite_guard.h"

typedef struct ft_trainer {
    const ft_run_config *cfg;
    ft_comm *comm;        /* MPI: ranks, scalar reductions (owned by the caller) */
    ft_comm *dev_comm;    /* tensor collectives on device buffers: NCCL for CUDA, else comm */
    ft_backend *be;
    ft_model_layout layout;
    ft_model *model;
    ft_engine *engine;
    /* LoRA (model/lora.h): engine trains the adapters of adapter_layout, base holds the
     * frozen model of layout; without LoRA base is NULL and engine holds the model.
     * train_layout is the engine's layout either way (checkpoints, the finite guard). */
    ft_lora_config lora;
    ft_model_layout adapter_layout;
    ft_engine *base;
    const ft_model_layout *train_layout;
    char base_hash[17]; /* LoRA: model.weights' content identity, "" for a seeded base */
    ft_dataset_info train_info;
    ft_tok_identity tok; /* the run's tokenizer, recorded in checkpoints (train/tok_check.h) */
    struct ft_loader *loader; /* the training rows, prefetched in the background */
    ft_data_order order;

    long start_step;     /* 0, or the step a resumed checkpoint had reached */
    int64_t sample_base; /* global sample index of start_step's first sample */
    int accum;           /* micro-batches per rank per optimizer step */
    int rows_per_rank;   /* micro_batch_size * accum */
    uint32_t *tokens;    /* [rows_per_rank, seq_len+1] evaluation staging */
    uint8_t *loss_mask;
    int32_t *segment;
    int seq_len;
    FILE *out;           /* log stream (rank 0), NULL elsewhere */
    struct ft_metrics *metrics; /* metrics JSONL (rank 0), NULL when not configured */
    struct ft_watchdog *watchdog;
    double peak_flops;   /* per rank, for MFU; 0: unknown, MFU not shown (train/mfu.h) */
    double flops_per_token; /* 6 N: the model FLOPs of a token outside attention */
    double flops_per_key;   /* 12 L H d: per visible (query, key) pair */
    ft_startup_timer *startup; /* main's, NULL when not timed */
    int stopped_by_signal; /* 0, or the exit code a stop signal calls for */
    int ckpt_lock_fd;      /* rank 0: checkpoint_dir's lock (train/ckpt_dir.h), or -1 */
    long no_target_steps;  /* steps whose global batch had no target token */
    ft_progress progress;  /* the live view (rank 0): a bar, progress lines or nothing */
    struct ft_tb_writer *tb; /* TensorBoard event file (rank 0, tensorboard_dir), or NULL */
    double best_eval;      /* keep_best: the lowest eval loss of a kept checkpoint so far */
    /* Run after each evaluation on every rank (collective), e.g. the sample generations
     * main.c installs; NULL: none. Set after ft_trainer_setup. */
    int (*after_eval)(void *ctx, struct ft_trainer *t, long step, ft_error *err);
    void *after_eval_ctx;
    long last_ckpt_step;   /* step of the last checkpoint written or resumed from, -1: none */
    ft_collapse collapse;  /* consecutive collapsed steps (train/finite_guard.h) */
} ft_trainer;

/* The result of one optimizer step (identical on all ranks). */
typedef struct ft_step_stats {
    double loss;       /* mean over the global batch's target tokens */
    double grad_norm;  /* before clipping */
    double lr;
    long n_targets;
    double seconds;
    uint64_t bytes_sent; /* by this rank in tensor collectives during the step */
    double data_wait;    /* seconds reading this step's rows */
    int skipped;         /* non-finite loss or gradient: no update was applied */
    double comm_wait;    /* seconds this rank blocked waiting for collectives */
    int64_t visible_keys; /* (query, key) pairs the masks let through, all ranks' rows */
    double phase_ms[FT_PHASE_COUNT]; /* this rank's time by phase (profile_phases) */
} ft_step_stats;

/* eval_only: the run writes no checkpoint, so it neither takes checkpoint_dir's lock
 * (it may read a running job's checkpoints) nor needs the directory writable. */
int ft_trainer_setup(ft_trainer *t, const ft_run_config *cfg, ft_comm *comm, FILE *out,
                     bool eval_only, struct ft_watchdog *watchdog,
                     ft_startup_timer *startup, ft_error *err);
void ft_trainer_free(ft_trainer *t);
/* The source the model runs on: the frozen base with LoRA, else the engine. */
ft_param_source ft_trainer_model_source(ft_trainer *t);

/* Runs optimizer step number `step` (0-based). */
int ft_trainer_step(ft_trainer *t, long step, ft_step_stats *st, ft_error *err);
/* The whole loop: max_steps steps with logging and periodic eval. After a stop signal
 * it checkpoints and returns 0 with t->stopped_by_signal set. */
int ft_trainer_run(ft_trainer *t, ft_error *err);
/* Mean target-token loss over the first max_rows rows (0: all) of a dataset file. */
int ft_trainer_evaluate(ft_trainer *t, const char *path, long max_rows, double *mean_loss,
                        long *n_targets, ft_error *err);

#endif
