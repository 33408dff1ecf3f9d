/* The CPU execution harness for CUDA, NCCL on MPI: what cudaemu_nccl.c (communicators,
 * groups, collectives) and cudaemu_nccl_types.c (types and operators) share. */
#ifndef FT_CUDAEMU_NCCL_H
#define FT_CUDAEMU_NCCL_H

#include <mpi.h>
#include <nccl.h>
#include <stddef.h>

/* MPI's view of bf16: a 2-byte type and sum, prod, max, min over it. */
typedef struct nccl_types {
    MPI_Datatype bf16;
    MPI_Op bf16_op[4]; /* sum, prod, max, min */
} nccl_types;

int nccl_types_create(nccl_types *t);
void nccl_types_free(nccl_types *t);
/* Bytes of one element; 0 for types the harness does not emulate (fp16, fp8). */
size_t nccl_type_size(ncclDataType_t t);
MPI_Datatype nccl_mpi_type(const nccl_types *types, ncclDataType_t t);
/* MPI_OP_NULL for operators the harness does not emulate (avg, pre-multiplied sums). */
MPI_Op nccl_mpi_op(const nccl_types *types, ncclDataType_t t, ncclRedOp_t op);

#endif
