/* keep_best: <dir>/best names the checkpoint with the lowest eval loss so far and that
 * loss, one line "step-NNNNNN.h5 <loss>", so that pruning spares it and a resumed run
 * keeps comparing against it. Rank 0 only; no MPI. */
#ifndef FT_TRAIN_CKPT_BEST_H
#define FT_TRAIN_CKPT_BEST_H

#include <stddef.h>

#include "util/error.h"

#define FT_CKPT_BEST "best"

/* 1 when there is no record, 0 with name and loss, -1 (message) when the file is not
 * one. name: a checkpoint file name of dir (ckpt_dir.h's form). */
int ft_ckpt_best_read(const char *dir, char *name, size_t len, double *loss, ft_error *err);

/* Records step-<step>.h5 with loss, replacing the file durably (a crash leaves the old
 * record or the new one). */
int ft_ckpt_best_write(const char *dir, long step, double loss, ft_error *err);

#endif
