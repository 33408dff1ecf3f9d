/* Collective communication between ranks, independent of the transport.
 *
 * Two implementations: MPI (src/comm/comm_mpi.c; host buffers, used with the CPU
 * backend) and NCCL (cuda/comm_nccl.cu; device buffers). Every collective is
 * nonblocking: it returns a request that ft_comm_wait completes, so the engine can
 * overlap communication with compute. Each rank counts the bytes it sends, by the
 * standard ring-algorithm accounting, so tests can check traffic against theory:
 *   all_reduce of n bytes:      2 (P-1)/P n
 *   reduce_scatter to n/P each:   (P-1)/P n
 *   all_gather of n/P each:       (P-1)/P n
 *   broadcast of n bytes:         n on the root, 0 elsewhere (counted on the root)
 */
#ifndef FT_COMM_COMM_H
#define FT_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct ft_comm ft_comm;
typedef struct ft_comm_request ft_comm_request;

typedef struct ft_comm_stats {
    uint64_t bytes_sent;       /* ring-accounted, see above */
    uint64_t n_collectives;
    double seconds_in_wait;    /* host time blocked in ft_comm_wait */
} ft_comm_stats;

typedef struct ft_comm_ops {
    /* In place: buf = sum over ranks of buf (fp32). */
    int (*all_reduce_f32)(ft_comm *c, float *buf, size_t n, ft_comm_request **req);
    /* out[count] = sum over ranks of in[rank*count .. rank*count+count) (fp32). In place
     * when out == in + rank*count; the rest of in is then undefined after the wait. */
    int (*reduce_scatter_f32)(ft_comm *c, float *out, const float *in, size_t count,
                              ft_comm_request **req);
    /* out[P*bytes] = concatenation of every rank's in[bytes]. */
    /* The same two reductions on bf16 values (raw uint16 bits): each partial sum is
     * formed in fp32 and rounded to bf16. Half the bytes of fp32. */
    int (*all_reduce_bf16)(ft_comm *c, uint16_t *buf, size_t n, ft_comm_request **req);
    int (*reduce_scatter_bf16)(ft_comm *c, uint16_t *out, const uint16_t *in, size_t count,
                               ft_comm_request **req);
    /* out[r*bytes ..] = rank r's in[0, bytes). In place when in == out + rank*bytes. */
    int (*all_gather)(ft_comm *c, void *out, const void *in, size_t bytes, ft_comm_request **req);
    int (*broadcast)(ft_comm *c, void *buf, size_t bytes, int root, ft_comm_request **req);
    int (*wait)(ft_comm *c, ft_comm_request *req, ft_error *err); /* frees req */
    /* Blocking scalar reductions on host values (loss sums, norms, counts). */
    int (*all_reduce_f64_sum)(ft_comm *c, double *vals, int n, ft_error *err);
    int (*all_reduce_i64_sum)(ft_comm *c, int64_t *vals, int n, ft_error *err);
    int (*all_reduce_f64_max)(ft_comm *c, double *vals, int n, ft_error *err);
    int (*barrier)(ft_comm *c, ft_error *err);
    void (*destroy)(ft_comm *c);
} ft_comm_ops;

struct ft_comm {
    const ft_comm_ops *ops;
    const char *name;   /* "mpi" | "nccl" */
    int rank, size;
    int local_rank, local_size; /* within the node (MPI_Comm_split_type SHARED) */
    ft_comm_stats stats;
    void *impl;
};

/* MPI communicator over a duplicate of MPI_COMM_WORLD. Requires MPI_Init done. */
int ft_comm_mpi_create(ft_comm **out, ft_error *err);

struct ft_backend;
/* NCCL communicator for the CUDA backend `be` (device bound by node-local rank); the
 * collectives are ordered with be's compute stream by events. Fails with a clear
 * message in a build without CUDA. */
int ft_comm_nccl_create(ft_comm **out, struct ft_backend *be, ft_error *err);

static inline int ft_comm_wait(ft_comm *c, ft_comm_request *req, ft_error *err)
{
    return req ? c->ops->wait(c, req, err) : 0;
}

static inline void ft_comm_destroy(ft_comm *c)
{
    if (c)
        c->ops->destroy(c);
}

#endif
