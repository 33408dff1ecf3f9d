#include "comm/world.h"

double ft_world_seconds(void) { return MPI_Wtime(); }

int ft_world_any(MPI_Comm comm, int flag)
{
    int any = flag != 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

void ft_world_gather(MPI_Comm comm, const void *mine, size_t bytes, void *all, int root)
{
    /* records are a few hundred bytes: one int count is enough */
    MPI_Gather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, root, comm);
}

void ft_world_broadcast(MPI_Comm comm, void *buf, size_t bytes, int root)
{
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, comm);
}
