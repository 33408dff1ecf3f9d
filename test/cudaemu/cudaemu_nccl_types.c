/* The CPU execution harness for CUDA, NCCL on MPI: NCCL data types and reduction
 * operators as MPI datatypes and operators.
 *
 * Native types map to MPI's own types and built-in operators. MPI has no bfloat16: it
 * travels as a 2-byte contiguous type with user-defined operators that widen to fp32,
 * combine, and round the partial result back to bf16 (nearest, ties to even), exactly as
 * src/comm/comm_mpi.c sums bf16: each partial sum is rounded, so the result depends on
 * the reduction order as NCCL's does. */
#include "cudaemu_nccl.h"

#include "util/bf16.h"

static void bf16_combine(const uint16_t *in, uint16_t *inout, int n, ncclRedOp_t op)
{
    for (int i = 0; i < n; i++) {
        float a = ft_bf16_to_f32(in[i]), b = ft_bf16_to_f32(inout[i]), r;
        switch (op) {
        case ncclSum: r = a + b; break;
        case ncclProd: r = a * b; break;
        case ncclMax: r = a > b ? a : b; break;
        default: r = a < b ? a : b; break;
        }
        inout[i] = ft_f32_to_bf16(r);
    }
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    bf16_combine(in, inout, *len, ncclSum);
}

static void bf16_prod(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    bf16_combine(in, inout, *len, ncclProd);
}

static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    bf16_combine(in, inout, *len, ncclMax);
}

static void bf16_min(void *in, void *inout, int *len, MPI_Datatype *t)
{
    (void)t;
    bf16_combine(in, inout, *len, ncclMin);
}

int nccl_types_create(nccl_types *t)
{
    if (MPI_Type_contiguous(2, MPI_BYTE, &t->bf16) != MPI_SUCCESS ||
        MPI_Type_commit(&t->bf16) != MPI_SUCCESS)
        return -1;
    MPI_User_function *fns[4] = { bf16_sum, bf16_prod, bf16_max, bf16_min };
    for (int i = 0; i < 4; i++)
        if (MPI_Op_create(fns[i], 1, &t->bf16_op[i]) != MPI_SUCCESS)
            return -1;
    return 0;
}

void nccl_types_free(nccl_types *t)
{
    for (int i = 0; i < 4; i++)
        MPI_Op_free(&t->bf16_op[i]);
    MPI_Type_free(&t->bf16);
}

size_t nccl_type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0; /* fp16, fp8: not emulated */
    }
}

MPI_Datatype nccl_mpi_type(const nccl_types *types, ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: return MPI_INT8_T;
    case ncclUint8: return MPI_UINT8_T;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclBfloat16: return types->bf16;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op nccl_mpi_op(const nccl_types *types, ncclDataType_t t, ncclRedOp_t op)
{
    if (op < ncclSum || op > ncclMin || op == ncclAvg)
        return MPI_OP_NULL;
    if (t == ncclBfloat16)
        return types->bf16_op[op == ncclSum ? 0 : op == ncclProd ? 1 : op == ncclMax ? 2 : 3];
    return op == ncclSum ? MPI_SUM : op == ncclProd ? MPI_PROD : op == ncclMax ? MPI_MAX : MPI_MIN;
}
