/* The checkpoint directory: step-NNNNNN.h5 files, the `latest` pointer that names the
 * newest complete one, and pruning to keep_last. Rank 0 only; no MPI.
 *
 * Invariant after every publish and prune: `latest` names an existing HDF5 file in the
 * directory. Checkpoints are ordered by the step number in their name read as a number
 * (step-1000000.h5 is newer than step-999999.h5), never as text. */
#ifndef FT_TRAIN_CKPT_DIR_H
#define FT_TRAIN_CKPT_DIR_H

#include <stddef.h>

#include "util/error.h"

#define FT_CKPT_LATEST "latest"

/* The step of a checkpoint file name "step-<digits>.h5"; 0, or -1 when the name is not
 * one (including a step that does not fit a long). */
int ft_ckpt_step_of_name(const char *name, long *step);

/* out = "<dir>/step-NNNNNN.h5" with one slash however dir ends (util/path_join.h): the
 * name every message and the writer use for the checkpoint of `step`. 0, or -1 when it
 * does not fit. */
int ft_ckpt_step_path(char *out, size_t len, const char *dir, long step);

/* Reads <dir>/latest into name (without the newline). Returns 1 when there is no
 * `latest` (a fresh directory), 0 when it names a plain file name, -1 (with a message
 * that does not echo unprintable bytes) when its content is not a checkpoint name. */
int ft_ckpt_read_latest(const char *dir, char *name, size_t len, ft_error *err);

/* Deletes the oldest step-*.h5 files of dir beyond the newest `keep` (keep <= 0: none),
 * never the one `latest` names nor `spare` (keep_best's, or NULL), then checks the
 * invariant above. */
int ft_ckpt_prune(const char *dir, int keep, const char *spare, ft_error *err);

/* Takes the directory's lock for this job: an fcntl write lock on <dir>/.ftmpi-lock,
 * which holds "pid@host" of its owner. The kernel drops it when the process ends,
 * however it ends. *fd: the open lock file, to keep open for the whole run (close it to
 * release). -1 with a message naming the owner when another job holds it. */
int ft_ckpt_lock(const char *dir, int *fd, ft_error *err);

#endif
