#include "prep/prep_comm.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/durable.h"

int prep_agree(MPI_Comm comm, int rc, ft_error *err)
{
    int rank, first;
    MPI_Comm_rank(comm, &rank);
    int mine = rc ? rank : 1 << 30;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == 1 << 30)
        return 0;
    if (rank != first && err)
        ft_error_clear(err);
    return -1;
}

int prep_commit_tmp(MPI_Comm comm, const char *tmp, const char *path, const char *phase,
                    ft_error *err)
{
    const char *fault = getenv("FTMPI_FAULT");
    if (fault && strncmp(fault, "prep:", 5) == 0 && strcmp(fault + 5, phase) == 0)
        raise(SIGKILL);
    int rank;
    MPI_Comm_rank(comm, &rank);
    int rc = rank == 0 ? ft_commit_file(tmp, path, err) : 0;
    if (rc)
        unlink(tmp);
    return prep_agree(comm, rc, err);
}
