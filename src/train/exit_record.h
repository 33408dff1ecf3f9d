/* The job's verdict where its launcher's caller can find it.
 *
 * Open MPI's mpirun turns a SIGTERM it receives into exit status 1 whatever its ranks
 * returned, so a job stopped by SIGTERM under mpirun would not requeue although every
 * rank checkpointed and exited 85. Rank 0 therefore also records the code in
 * <checkpoint_dir>/.ftmpi-exit (written to a temporary name, then renamed), tagged
 * with FTMPI_RUN_ID, an identity the job script gives this launch. `ftmpi --exit-status
 * DIR` prints the recorded code only when the record carries the caller's FTMPI_RUN_ID,
 * so a record from an earlier launch is never taken for this one; and every training
 * run removes any record when it takes the directory's lock, so a run that fails for
 * another reason leaves none. */
#ifndef FT_TRAIN_EXIT_RECORD_H
#define FT_TRAIN_EXIT_RECORD_H

#include "util/error.h"

#define FT_EXIT_RECORD ".ftmpi-exit"

/* Removes dir's record (none is fine). */
int ft_exit_record_clear(const char *dir, ft_error *err);

/* Records code and step for the launch named by $FTMPI_RUN_ID (none: nothing to record
 * for, returns 0). */
int ft_exit_record_write(const char *dir, int code, long step, ft_error *err);

/* The code recorded in dir for run_id: 0 and *code, or -1 when there is no record, it
 * is unreadable, or it belongs to another launch. */
int ft_exit_record_read(const char *dir, const char *run_id, int *code);

#endif
