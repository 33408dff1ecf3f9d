/* The few blocking host-side collectives the trainer needs beside the engine's
 * communicator (comm.h), so that train/ makes no MPI call of its own: the job's wall
 * clock, a flag any rank may raise, one fixed-size record per rank gathered on a root,
 * and a root's value sent to all. All are collective over comm except ft_world_seconds. */
#ifndef FT_COMM_WORLD_H
#define FT_COMM_WORLD_H

#include <mpi.h>
#include <stddef.h>

/* Seconds on the MPI wall clock (MPI_Wtime): only differences mean anything. */
double ft_world_seconds(void);

/* Nonzero on every rank when `flag` is nonzero on any rank. */
int ft_world_any(MPI_Comm comm, int flag);

/* Rank r's `bytes` bytes at `mine` land at all + r * bytes on `root`; `all` (size x
 * bytes) is only written on root and may be NULL elsewhere. */
void ft_world_gather(MPI_Comm comm, const void *mine, size_t bytes, void *all, int root);

/* root's `bytes` bytes at buf land at buf on every rank. */
void ft_world_broadcast(MPI_Comm comm, void *buf, size_t bytes, int root);

#endif
