/* The training data loader: a background thread reads the rows of step s+1 while step
 * s computes.
 *
 * HDF5 here is not thread-safe and the main thread runs MPI collectives concurrently,
 * so the thread reads through its own POSIX (non-MPI) handle of the dataset file and
 * makes no MPI calls; each rank reads its own rows independently. Before the main
 * thread touches HDF5 itself (evaluation, checkpoints), it calls ft_loader_quiesce. */
#ifndef FT_TRAIN_LOADER_H
#define FT_TRAIN_LOADER_H

#include <stdint.h>

#include "util/error.h"

typedef struct ft_loader ft_loader;

typedef struct ft_loader_stats {
    long rows_read;
    double seconds_reading; /* in the loader (background or not) */
    double seconds_waited;  /* the trainer blocked in ft_loader_take */
} ft_loader_stats;

/* rows_per_step rows of `width` (= seq_len + 1) tokens each. background = 0 reads in
 * the caller's thread (no prefetch). */
int ft_loader_create(ft_loader **out, const char *path, int rows_per_step, int width,
                     int background, ft_error *err);
void ft_loader_free(ft_loader *l);

/* Starts reading rows[0..n) for `tag` (e.g. the step number) in the background. */
void ft_loader_request(ft_loader *l, long tag, const int64_t *rows, int n);

/* The rows of `tag`: waits for a matching request, or reads them now if there was
 * none. The buffers stay valid until the next take. */
int ft_loader_take(ft_loader *l, long tag, const int64_t *rows, int n, uint32_t **tokens,
                   uint8_t **loss_mask, int32_t **segment, ft_error *err);

/* The tokens of `tag` if its background read has completed, else NULL, without waiting
 * or taking them: valid until the next take or request. The trainer looks at the next
 * step's ids before queuing the optimizer step (shard/engine_lookup.c). */
const uint32_t *ft_loader_peek(ft_loader *l, long tag);
/* Waits until no read is in flight (its result is kept for the next take). */
void ft_loader_quiesce(ft_loader *l);

ft_loader_stats ft_loader_get_stats(const ft_loader *l);

#endif
