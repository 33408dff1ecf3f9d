/* The run's length in optimizer steps: max_steps, or num_epochs passes over data.train. */
#ifndef FT_TRAIN_RUN_LENGTH_H
#define FT_TRAIN_RUN_LENGTH_H

#include <stdint.h>

#include "config/run_config.h"

/* ceil(num_epochs x rows / global_batch_size), at least 1: the last step may reach into
 * the next epoch's order (data_order.h) rather than drop the epoch's tail. */
long ft_run_length_steps(double num_epochs, int64_t rows, int global_batch_size);

/* With num_epochs (and not eval_only): reads data.train's row count (collective over
 * MPI_COMM_WORLD) and sets cfg->max_steps, checking optimizer.warmup_steps against it.
 * Errors are alike on every rank (FT_ERR_SHARED). */
int ft_run_length_resolve(ft_run_config *cfg, bool eval_only, ft_error *err);

/* Passes over the data done after `samples` global samples (the epoch in the step line). */
double ft_run_length_epoch(int64_t samples, int64_t rows);

#endif
