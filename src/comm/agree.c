#include "comm/agree.h"

void ft_share_error(MPI_Comm comm, int root, ft_error *err)
{
    ft_error scratch = { { 0 }, 0 };
    ft_error *e = err ? err : &scratch;
    MPI_Bcast(e->msg, FT_ERROR_MAX, MPI_CHAR, root, comm);
    e->msg[FT_ERROR_MAX - 1] = '\0';
    e->flags |= FT_ERR_SHARED;
}

int ft_agree(MPI_Comm comm, int rc, ft_error *err)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int first = rc ? rank : size;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size)
        return 0;
    ft_share_error(comm, first, err);
    return -1;
}

int ft_agree_config(MPI_Comm comm, int rc, ft_error *err)
{
    if (ft_agree(comm, rc, err) == 0)
        return 0;
    if (err)
        err->flags |= FT_ERR_CONFIG;
    return -1;
}
