/* Agreement on failure across the ranks of ftmpi-prep: every phase ends with all ranks knowing
 * whether any failed, so that no rank waits in a collective that the others left. */
#ifndef FT_PREP_COMM_H
#define FT_PREP_COMM_H

#include <mpi.h>

#include "util/error.h"

/* Collective. Returns 0 when rc == 0 on every rank, else -1 everywhere. The message of the
 * lowest failing rank stays in its err (to be printed there); the other ranks' messages are
 * cleared so that one line is printed, not one per rank. */
int prep_agree(MPI_Comm comm, int rc, ft_error *err);

#endif
