/* Pre-emption signals. SIGUSR1 (SLURM's --signal) and SIGTERM ask the run to stop:
 * every rank finishes its current step, the ranks agree (a signal may reach them at
 * slightly different times), a checkpoint is written and ftmpi exits with
 * FT_EXIT_SIGNALLED. A second signal (2 s or more after the first; launchers may
 * deliver one request twice) exits at once with FT_EXIT_KILLED: any checkpoint
 * being written is a .tmp file, so the last good one stays untouched. */
#ifndef FT_TRAIN_SIGNALS_H
#define FT_TRAIN_SIGNALS_H

#define FT_EXIT_SIGNALLED 85 /* checkpointed on a signal: requeue me */
#define FT_EXIT_SIGNALLED_NO_CKPT 84 /* stopped on a signal without checkpoint_dir:
                                        requeueing would start from scratch */
#define FT_EXIT_KILLED 86    /* second signal: stopped at once */

void ft_signals_install(void);
/* Nonzero once a stop signal arrived at this rank. */
int ft_signals_stop_requested(void);

#endif
