/* Ranks agreeing on failure. A phase in which each rank does its own I/O (its slices of
 * a checkpoint) can fail on some ranks only, at different places; a rank that returned
 * early would then meet its peers in different collectives (MPI_ERR_TRUNCATE, or a
 * hang). After such a phase every rank calls ft_agree: all learn whether any failed,
 * and all hold the first failing rank's message, so the job ends with one line. */
#ifndef FT_COMM_AGREE_H
#define FT_COMM_AGREE_H

#include <mpi.h>

#include "util/error.h"

/* Collective over comm. rc: this rank's result (0 = ok). Returns 0 when every rank
 * succeeded; else -1 on every rank with err (when non-NULL) set to the message of the
 * lowest failing rank and marked FT_ERR_SHARED. */
int ft_agree(MPI_Comm comm, int rc, ft_error *err);

/* ft_agree for a start-up fact that the configuration is answerable for (a file it names
 * is missing, unreadable or does not fit the run): also marks the error FT_ERR_CONFIG, so
 * the job ends with one line and exit 2, as a configuration error does. */
int ft_agree_config(MPI_Comm comm, int rc, ft_error *err);

/* Rank 0's message replaces every rank's, marked FT_ERR_SHARED: for a failure that rank 0
 * decided (e.g. a file only rank 0 handles) after the others learnt that it failed. */
void ft_share_error(MPI_Comm comm, int root, ft_error *err);

#endif
