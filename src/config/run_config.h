/* The run configuration: everything `ftmpi input.cfg [key=value ...]` reads.
 *
 * The config file is libconfig. Keys are looked up through one schema table
 * (src/config/config_schema.c) that gives each key its type, range and default, so
 * every key is validated the same way whether it comes from the file or from a
 * command-line override, and an unknown key is an error with file:line.
 */
#ifndef FT_CONFIG_RUN_CONFIG_H
#define FT_CONFIG_RUN_CONFIG_H

#include <stdbool.h>

#include "model/model_config.h"
#include "util/dtype.h"
#include "util/precision.h"
#include "util/error.h"

typedef enum ft_optimizer_type { FT_OPT_ADAMW = 0, FT_OPT_SGD = 1 } ft_optimizer_type;
typedef enum ft_schedule_type {
    FT_SCHED_COSINE = 0,
    FT_SCHED_LINEAR = 1,
    FT_SCHED_CONSTANT = 2,
} ft_schedule_type;

typedef struct ft_optimizer_config {
    ft_optimizer_type type;
    double lr;            /* peak learning rate */
    double min_lr;        /* floor of the decay */
    double beta1, beta2, eps;
    double weight_decay;  /* decoupled; applied to 2-D weights only (not norms) */
    double momentum;      /* SGD */
    ft_schedule_type schedule;
    long warmup_steps;    /* linear warmup from 0 to lr over these steps */
} ft_optimizer_config;

typedef struct ft_run_config {
    /* where it came from, for messages and for checkpoint metadata */
    char *path;           /* the config file as given */
    char *text;           /* file contents followed by the overrides, one per line */

    /* model = { ... } : either weights = "file.h5" or the shape keys */
    char *model_weights;  /* NULL: random init from seed with the shape below */
    ft_model_config model;
    ft_dtype param_dtype; /* storage of the working parameters: "fp32" | "bf16" */
    double init_std;      /* normal(0, init_std) for weights; norms start at 1 */

    /* data = { ... } */
    char *train_data;     /* dataset file (doc/formats.md) */
    char *eval_data;      /* NULL: none */
    bool data_prefetch;   /* background loader thread */

    /* top level */
    char *device;         /* "cpu" | "cuda" */
    long max_steps;       /* optimizer steps (derived from num_epochs when that is set) */
    double num_epochs;    /* 0: max_steps is given */
    long seed;
    int micro_batch_size;  /* sequences per rank per forward/backward */
    int global_batch_size; /* sequences per optimizer step, over all ranks */
    int zero_stage;        /* 0..3 */
    bool activation_checkpointing;
    int checkpoint_layers; /* with it: blocks 0..n-1 recompute (0: all) */
    bool checkpoint_keep_attention; /* with it: recomputing blocks keep their attention half */
    bool checkpoint_keep_attention_output; /* ... or only attention's output and lse */
    int head_memory_mib;   /* 0: 1/64 of the device's memory */
    bool offload_optimizer;
    ft_dtype grad_reduce_dtype; /* fp32 | bf16 */
    /* the numerics recipe: "fp32", or "bf16" mixed precision (bf16 working parameters
     * and activations, fp32 master, moments, gradients, statistics and loss) */
    ft_dtype precision;
    /* every tensor kind's storage, resolved from the three keys above at load
     * (util/precision.h); what the trainer, engine, planner and model read */
    ft_precision numerics;
    double grad_clip;      /* global-norm clip; 0 disables */
    long log_every;
    long eval_every;       /* 0 disables periodic eval */
    long eval_batches;     /* 0: the whole eval set */
    char **eval_prompts;   /* NULL-terminated, or NULL: no sample generations */
    char *eval_tokenizer;  /* tokenizer.json or "bytes" */
    char *eval_template;   /* ftmpi-generate's template names */
    int eval_max_new_tokens;
    char *final_weights;   /* NULL: none */
    char *checkpoint_dir;  /* NULL: no checkpoints */
    long save_every;       /* 0: only at the end */
    int keep_last;         /* 0: keep all */
    bool direct_io;        /* raw O_DIRECT tensor transfers (io/extent_io.h) */
    char *resume;          /* "none" | "auto" | path */
    double comm_timeout;   /* seconds; 0 disables the watchdog */
    int max_nan_skips;
    bool allow_nonfinite; /* load a checkpoint or weights file holding NaN/Inf (to inspect it) */
    long collapse_steps;  /* stop after this many steps at loss ln V with grad norm 0; 0: never */
    char *metrics_file;
    double peak_tflops;    /* 0: the device's datasheet row (train/mfu.c), if any */
    bool log_ranks;
    bool profile_phases;   /* train/step_phases.h */
    bool allow_tokenizer_mismatch; /* train/tok_check.h */
    bool progress;
    double progress_every; /* seconds between progress lines off a terminal; 0: none */
    char *tensorboard_dir; /* NULL: no event files */
    bool keep_best;        /* keep the lowest-eval-loss checkpoint through pruning */

    ft_optimizer_config optimizer; /* optimizer = { ... } (schedule keys live here too) */

    /* lora = { ... } (model/lora.h): lora_rank 0 (no lora group, or lora.rank = 0; the
     * four fields are then all zero) trains every weight; else the model is frozen and
     * rank-lora_rank adapters on lora_targets are trained. lora_targets: HF module names
     * of the family, NULL-terminated, none repeated; NULL: every projection of the family.
     * ft_run_config_lora (config/config_lora.h) resolves them once the family is known. */
    int lora_rank;
    double lora_alpha;    /* > 0; 2 x lora_rank unless given */
    double lora_dropout;  /* [0, 1) */
    char **lora_targets;
    char *model_adapter; /* model.adapter: a PEFT adapter directory the adapters start from
                          * (NULL: none); only with LoRA */

    char **where; /* per schema key: where its value came from (ft_run_config_where) */
} ft_run_config;

/* libconfig's scanner takes time quadratic in the length of a string literal (a 10 MB
 * string: over 30 s), so ftmpi bounds what it hands it: a config file, and each file it
 * @includes, may have at most FT_CONFIG_MAX_BYTES bytes (real ones have a few kB), and a
 * command-line override at most FT_CONFIG_MAX_OVERRIDE. */
#define FT_CONFIG_MAX_BYTES (1024 * 1024)
#define FT_CONFIG_MAX_OVERRIDE (64 * 1024)

/* Reads `path`, applies the `key=value` overrides in order, validates everything.
 * On error returns -1 with one line "file:line: key: problem" (or
 * "command line: key=value: problem"). cfg is owned by the caller: free with
 * ft_run_config_free (also after a failure). */
int ft_run_config_load(ft_run_config *cfg, const char *path, int n_overrides,
                       char *const *overrides, ft_error *err);

void ft_run_config_free(ft_run_config *cfg);

/* Where key `path` (e.g. "model.max_position_embeddings") got its value, for a message
 * about the configuration found after loading: "f.cfg:12: model.max_position_embeddings",
 * "command line: model.max_position_embeddings=16", or "f.cfg: <key>" for a default. */
const char *ft_run_config_where(const ft_run_config *cfg, const char *path);

/* The checks of a config for a run of this build on world_size ranks, with the same kind
 * of message as ft_run_config_load: global_batch_size a multiple of micro_batch_size x
 * ranks, and a device this build has. (A config for other ranks or another build still
 * loads, e.g. for --plan.) */
#define FT_CONFIG_PATH_MAX 1024 /* bytes of a path key (room for derived names) */
int ft_run_config_check_run(const ft_run_config *cfg, int world_size, ft_error *err);
/* Only the batch geometry of that check (also what `ftmpi --plan -np N` checks). */
int ft_run_config_check_batch(const ft_run_config *cfg, int world_size, ft_error *err);

/* Writes a description of every key (type, default, meaning) in the layout of
 * doc/config.md, for `ftmpi --help-config` and to keep the doc true. */
void ft_run_config_print_reference(void *file /* FILE* */);

#endif
