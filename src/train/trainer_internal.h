/* What the files of the trainer share beyond trainer.h: the set-up (trainer.c) calls
 * on the model's loading (trainer_load.c) and the start-up report (trainer_report.c);
 * the loop (trainer_run.c) reports its checkpoints as set-up reports a resume. */
#ifndef FT_TRAIN_TRAINER_INTERNAL_H
#define FT_TRAIN_TRAINER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "train/mfu.h"
#include "train/trainer.h"

/* The model's shape into t->layout, with LoRA the adapters' into t->adapter_layout. */
int ft_trainer_resolve_model_shape(ft_trainer *t, ft_error *err);
/* The model's weights into e: model.weights, or the seeded random initialisation. */
int ft_trainer_load_model_weights(ft_trainer *t, ft_engine *e, ft_error *err);
/* The trained parameters of a fresh run into t->engine: the model, or the adapters. */
int ft_trainer_load_parameters(ft_trainer *t, ft_error *err);

/* Formats a checkpoint transfer of `path` for a log line: time, size, rate, I/O path. */
void ft_trainer_io_summary(char *buf, size_t len, const char *path, double seconds,
                           bool direct);
/* The start-up lines of rank 0's log: model, batch, LoRA, memory, sharding. */
void ft_trainer_print_startup(ft_trainer *t);
/* The start-up lines on MFU's basis and peak, and the start-up phases so far. */
void ft_trainer_print_mfu_basis(ft_trainer *t, const ft_peak *peak);
/* log_ranks: each rank's host and device, printed by rank 0 (collective). */
int ft_trainer_log_rank_placement(ft_trainer *t, ft_error *err);

#endif
