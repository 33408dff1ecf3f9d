/* The memory planner: per-rank memory of a config on N ranks for every ZeRO stage,
 * with and without optimizer offload and activation checkpointing, without
 * allocating anything (`ftmpi --plan`). The figures come from the same code paths
 * that allocate in a real run (dry runs of the engine and the model). */
#ifndef FT_TRAIN_PLAN_H
#define FT_TRAIN_PLAN_H

#include <stdio.h>

#include "config/run_config.h"
#include "model/layout.h"
#include "model/model.h"
#include "shard/engine.h"
#include "train/plan_parts.h"

typedef struct ft_plan_options {
    int world_size;      /* -np */
    int seq_len;         /* 0: from the training dataset */
    double device_gib;   /* memory per device to check against */
} ft_plan_options;

/* The engine and model options a run of cfg uses (with rows of seq_len T), shared by
 * the trainer and the planner so that the plan is the run's allocation. */
ft_engine_options ft_run_engine_options(const ft_run_config *cfg, int T);
/* device_bytes: the memory of one rank's device (host RAM on the CPU), from which the
 * LM head's default memory budget is derived (head_memory_mib). */
size_t ft_run_head_budget(const ft_run_config *cfg, double device_bytes);
ft_model_options ft_run_model_options(const ft_run_config *cfg, int T, double device_bytes);
/* What the config's recomputing blocks keep (checkpoint_keep_attention,
 * checkpoint_keep_attention_output). */
ft_ckpt_keep ft_run_ckpt_keep(const ft_run_config *cfg);
/* ", attention kept" or the like for a log line; "" when nothing is kept. */
const char *ft_ckpt_keep_phrase(ft_ckpt_keep keep);

int ft_plan_print(FILE *out, const ft_run_config *cfg, const ft_plan_options *po, ft_error *err);

/* Bytes one rank of this config allocates on the device and on the host (the same
 * dry runs as the plan: with LoRA the frozen base, the adapters and the model with the
 * adapters attached), for a world of P ranks and rows of seq_len T. */
int ft_plan_rank_bytes(const ft_plan_models *pm, const ft_run_config *cfg, int P, int T,
                       double device_bytes, double *device, double *host, ft_error *err);

#endif
