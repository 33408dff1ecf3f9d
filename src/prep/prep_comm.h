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

/* Collective: the end of a write through tmp that every rank has finished (its failure
 * already agreed). The test hook FTMPI_FAULT=prep:<phase> kills every rank here, standing in
 * for a job killed between the write and the rename; then rank 0 renames tmp over path,
 * removing tmp if that fails, and every rank learns the outcome (prep_agree). */
int prep_commit_tmp(MPI_Comm comm, const char *tmp, const char *path, const char *phase,
                    ft_error *err);

#endif
