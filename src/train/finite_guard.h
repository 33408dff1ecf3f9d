/* Non-finite values never travel through files, and a run that has stopped learning says
 * so: the check of the state a checkpoint or weights file would hold, the same check on a
 * file just loaded, and the detection of a collapsed run. */
#ifndef FT_TRAIN_FINITE_GUARD_H
#define FT_TRAIN_FINITE_GUARD_H

#include <stdbool.h>
#include <stdio.h>

#include "model/layout.h"
#include "shard/engine.h"
#include "util/error.h"

/* A run stopped because it collapsed (train/finite_guard.h): no checkpoint is written. */
#define FT_EXIT_COLLAPSED 88

/* Before writing the engine's state to `what` (a path or "checkpoint at step N"):
 * 0 when it is finite; else -1 with a shared error (every rank holds it) naming where the
 * first NaN/Inf is (its tensor and element, as in "model.layers.3.mlp.up_proj.weight,
 * element 1234") and that nothing was written. Collective. */
int ft_guard_before_write(ft_engine *e, const ft_model_layout *l, const char *what,
                          ft_error *err);

/* After loading `path` into the engine, naming the first NaN/Inf as above: 0 when
 * finite, or when allow (the config's allow_nonfinite, to inspect such a file) is set,
 * which prints a warning through `out` (rank 0's log, may be NULL) and sets
 * *last_ckpt_step to -1 (no finite checkpoint to name); else -1 with a shared error.
 * Collective. */
int ft_guard_after_load(ft_engine *e, const ft_model_layout *l, const char *path, bool allow,
                        FILE *out, long *last_ckpt_step, ft_error *err);

/* After loading model.weights (`path`) into the frozen base of a LoRA run: the same check
 * and allow_nonfinite, naming the first tensor that holds NaN/Inf (a LoRA run writes no
 * base, so no checkpoint is affected). Collective. */
int ft_guard_base_after_load(ft_engine *base, const ft_model_layout *l, const char *path,
                             bool allow, FILE *out, ft_error *err);

/* After seeding a LoRA run's adapters from the PEFT directory `dir` (model.adapter): the
 * same check and allow_nonfinite, naming dir's adapter_model.safetensors and the first
 * NaN/Inf there by its tensor's PEFT key and its element in that file's tensor (base: the
 * base model's shape, which makes the keys). Collective. */
int ft_guard_adapter_after_load(ft_engine *e, const ft_model_layout *l, const char *dir,
                                const ft_model_config *base, bool allow, FILE *out,
                                ft_error *err);

/* A run whose loss sits at ln(vocab) (uniform predictions) with a zero gradient norm
 * learns nothing ever after: the parameters overflowed to the point where the softmax
 * is flat, typically from a huge learning rate. */
typedef struct ft_collapse {
    long run; /* consecutive collapsed steps so far */
} ft_collapse;

/* Updates c with a step's loss and gradient norm; true once `limit` consecutive steps
 * (limit > 0) have collapsed. */
bool ft_collapse_step(ft_collapse *c, double loss, double grad_norm, long vocab, long limit);

/* The error that stops a run after too many non-finite steps: true about the last
 * checkpoint (last_ckpt_step: written or resumed from in this run, -1 none). Returns -1. */
int ft_guard_nan_stop(ft_error *err, long step, double loss, double grad_norm, int skipped,
                      int max_skips, const char *checkpoint_dir, long last_ckpt_step);

/* Says once, through out (rank 0's log, may be NULL), that the run collapsed, and sets
 * *exit_code to FT_EXIT_COLLAPSED. Returns 0: the run ends, without a checkpoint. */
int ft_guard_collapsed(FILE *out, long step, long steps, double loss, int *exit_code);

#endif
