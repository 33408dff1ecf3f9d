#include "prep/prep_comm.h"

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
