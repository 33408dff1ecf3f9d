/* A watchdog thread per rank: the training loop reports progress; when none is
 * reported for `timeout` seconds (a peer rank died or hangs and this rank waits in a
 * collective forever), the watchdog prints which rank and host gave up and in which
 * phase, and ends the process with FT_EXIT_HUNG, so the launcher tears down the job
 * instead of a silent hang. With MPI_THREAD_MULTIPLE it first holds a roll call on a
 * communicator of its own (train/rollcall.h) to name the ranks that are missing; it
 * makes no other MPI call. */
#ifndef FT_TRAIN_WATCHDOG_H
#define FT_TRAIN_WATCHDOG_H

#define FT_EXIT_HUNG 87
/* the limit before the config is read: comm_timeout's default (config_schema.c) */
#define FT_DEFAULT_COMM_TIMEOUT 600.0

typedef struct ft_watchdog ft_watchdog;

/* timeout <= 0: no watchdog (returns NULL). rank: for the message (-1: not known yet). */
ft_watchdog *ft_watchdog_start(double timeout, int rank);
/* Changes the timeout (<= 0: stop watching, for good) and the rank named in the message,
 * e.g. once the config is read; counts as progress. */
void ft_watchdog_configure(ft_watchdog *w, double timeout, int rank);
/* Marks progress and names what the rank does next (a string literal). */
void ft_watchdog_progress(ft_watchdog *w, const char *phase);
/* After MPI_Init, on every rank (collective: duplicates MPI_COMM_WORLD): enables the roll
 * call when MPI provides MPI_THREAD_MULTIPLE. */
void ft_watchdog_attach_mpi(ft_watchdog *w);
void ft_watchdog_stop(ft_watchdog *w);

#endif
