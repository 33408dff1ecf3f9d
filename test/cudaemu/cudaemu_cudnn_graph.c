/* The harness's cuDNN: what finalize checks on tensors, operations and operation graphs,
 * and which graphs its engine takes (cudaemu_cudnn.h). A violation is a finding: cuDNN
 * would refuse the descriptor and the backend fall back in silence. */
#include <stdbool.h>
#include <string.h>

#include "cudaemu.h"
#include "cudaemu_cudnn.h"

const void *cd_need(const cd_desc *d, int name, int64_t count, const char *what)
{
    const cd_attr *a = cd_attr_find(d, name);
    if (!a)
        cudaemu_fail("cudnnBackendFinalize(%s): attribute %d not set", what, name);
    if (count > 0 && a->count != count)
        cudaemu_fail("cudnnBackendFinalize(%s): attribute %d has %lld elements, needs %lld", what,
                     name, (long long)a->count, (long long)count);
    return a->data;
}

int64_t cd_int_attr(const cd_desc *d, int name, int64_t dflt)
{
    const cd_attr *a = cd_attr_find(d, name);
    if (!a)
        return dflt;
    if (a->type == CUDNN_TYPE_INT64)
        return *(int64_t *)a->data;
    if (a->type == CUDNN_TYPE_BOOLEAN)
        return *(bool *)a->data;
    return *(int32_t *)a->data;
}

void cd_finalize_tensor(cd_desc *d)
{
    d->dtype = *(const int32_t *)cd_need(d, CUDNN_ATTR_TENSOR_DATA_TYPE, 1, "tensor");
    const int64_t *dim = cd_need(d, CUDNN_ATTR_TENSOR_DIMENSIONS, 4, "tensor (4 dims)");
    const int64_t *str = cd_need(d, CUDNN_ATTR_TENSOR_STRIDES, 4, "tensor (4 strides)");
    d->uid = *(const int64_t *)cd_need(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, "tensor");
    d->align = *(const int64_t *)cd_need(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, "tensor");
    d->is_virtual = (int)cd_int_attr(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, 0);
    d->by_value = (int)cd_int_attr(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, 0);
    memcpy(d->dim, dim, sizeof d->dim);
    memcpy(d->stride, str, sizeof d->stride);
    if (!cd_type_size(d->dtype))
        cudaemu_fail("tensor uid %lld: data type %d is not emulated", (long long)d->uid, d->dtype);
    if (d->align <= 0 || (d->align & (d->align - 1)))
        cudaemu_fail("tensor uid %lld: byte alignment %lld is not a power of two",
                     (long long)d->uid, (long long)d->align);
    for (int i = 0; i < 4; i++)
        if (dim[i] <= 0 || str[i] <= 0)
            cudaemu_fail("tensor uid %lld: dim %d = %lld, stride %lld (both must be positive)",
                         (long long)d->uid, i, (long long)dim[i], (long long)str[i]);
    if (d->by_value && (cd_elems(d) != 1 || d->is_virtual))
        cudaemu_fail("tensor uid %lld: a by-value tensor must be one non-virtual element",
                     (long long)d->uid);
    d->ragged = cd_attr_desc(d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, 0);
    if (d->ragged) {
        const cd_desc *r = d->ragged;
        if (r->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR ||
            (r->dtype != CUDNN_DATA_INT32 && r->dtype != CUDNN_DATA_INT64) ||
            r->dim[0] != d->dim[0] + 1 || r->dim[1] * r->dim[2] * r->dim[3] != 1 || r->is_virtual)
            cudaemu_fail("tensor uid %lld: its ragged offsets (uid %lld) must be a non-virtual "
                         "int32/int64 tensor [%lld, 1, 1, 1] (batch + 1)",
                         (long long)d->uid, (long long)r->uid, (long long)d->dim[0] + 1);
    }
}

static cd_desc *op_tensor(const cd_desc *op, int name, int required, const char *what)
{
    cd_desc *t = cd_attr_desc(op, name, 0);
    if (!t && required)
        cudaemu_fail("cudnnBackendFinalize(%s): operand %d not set", what, name);
    if (t && t->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR)
        cudaemu_fail("cudnnBackendFinalize(%s): operand %d is not a tensor", what, name);
    return t;
}

/* x broadcasts to y: each dim equal or 1. */
static void check_broadcast(const cd_desc *x, const cd_desc *y, const char *what)
{
    for (int i = 0; i < 4; i++)
        if (x->dim[i] != y->dim[i] && x->dim[i] != 1)
            cudaemu_fail("%s: input uid %lld dim %d = %lld does not broadcast to output uid %lld "
                         "dim %lld", what, (long long)x->uid, i, (long long)x->dim[i],
                         (long long)y->uid, (long long)y->dim[i]);
}

static void check_override(const cd_desc *ov, const cd_desc *c, const char *what)
{
    if (ov && (ov->dtype != CUDNN_DATA_INT32 || ov->dim[0] != c->dim[0] ||
               ov->dim[1] * ov->dim[2] * ov->dim[3] != 1 || ov->is_virtual))
        cudaemu_fail("%s: override uid %lld must be a non-virtual int32 [%lld, 1, 1, 1]", what,
                     (long long)ov->uid, (long long)c->dim[0]);
}

void cd_finalize_op(cd_desc *d)
{
    switch (d->type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        const cd_desc *pw = cd_attr_desc(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
        if (!pw || pw->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR)
            cudaemu_fail("pointwise operation without a pointwise descriptor");
        int mode = (int)cd_int_attr(pw, CUDNN_ATTR_POINTWISE_MODE, -1);
        cd_desc *x = op_tensor(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, 1, "pointwise");
        cd_desc *b = op_tensor(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0, "pointwise");
        cd_desc *t = op_tensor(d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, 0, "pointwise");
        cd_desc *y = op_tensor(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, 1, "pointwise");
        int unary = mode == CUDNN_POINTWISE_EXP || mode == CUDNN_POINTWISE_LOG ||
                    mode == CUDNN_POINTWISE_IDENTITY || mode == CUDNN_POINTWISE_GEN_INDEX;
        if (!unary && !b)
            cudaemu_fail("pointwise mode %d needs a second input (BDESC)", mode);
        if ((mode == CUDNN_POINTWISE_BINARY_SELECT) != (t != NULL))
            cudaemu_fail("pointwise mode %d: TDESC is for BINARY_SELECT only, and needed there",
                         mode);
        if (mode == CUDNN_POINTWISE_GEN_INDEX) {
            int64_t axis = cd_int_attr(pw, CUDNN_ATTR_POINTWISE_AXIS, -1);
            if (axis < 0 || axis > 3 || memcmp(x->dim, y->dim, sizeof x->dim) != 0)
                cudaemu_fail("GEN_INDEX: axis %lld, or output uid %lld not shaped as its input",
                             (long long)axis, (long long)y->uid);
        }
        check_broadcast(x, y, "pointwise");
        if (b)
            check_broadcast(b, y, "pointwise");
        if (t)
            check_broadcast(t, y, "pointwise (condition)");
        break;
    }
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
        cd_desc *a = op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, 1, "matmul");
        cd_desc *b = op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, 1, "matmul");
        cd_desc *c = op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, 1, "matmul");
        if (!cd_attr_desc(d, CUDNN_ATTR_OPERATION_MATMUL_DESC, 0))
            cudaemu_fail("matmul operation without a matmul descriptor");
        if (a->dim[2] != c->dim[2] || b->dim[3] != c->dim[3] || a->dim[3] != b->dim[2] ||
            a->dim[0] != c->dim[0] || b->dim[0] != c->dim[0] || a->dim[1] != c->dim[1] ||
            c->dim[1] % b->dim[1] != 0)
            cudaemu_fail("matmul: A uid %lld [%lld %lld %lld %lld] x B uid %lld [%lld %lld %lld "
                         "%lld] -> C uid %lld [%lld %lld %lld %lld] do not chain",
                         (long long)a->uid, (long long)a->dim[0], (long long)a->dim[1],
                         (long long)a->dim[2], (long long)a->dim[3], (long long)b->uid,
                         (long long)b->dim[0], (long long)b->dim[1], (long long)b->dim[2],
                         (long long)b->dim[3], (long long)c->uid, (long long)c->dim[0],
                         (long long)c->dim[1], (long long)c->dim[2], (long long)c->dim[3]);
        check_override(op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, 0, "m"), c, "matmul");
        check_override(op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, 0, "n"), c, "matmul");
        check_override(op_tensor(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, 0, "k"), c, "matmul");
        break;
    }
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
        cd_desc *x = op_tensor(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, 1, "reduction");
        cd_desc *y = op_tensor(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, 1, "reduction");
        if (!cd_attr_desc(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, 0))
            cudaemu_fail("reduction operation without a reduction descriptor");
        for (int i = 0; i < 4; i++)
            if (y->dim[i] <= 0 || x->dim[i] % y->dim[i] != 0)
                cudaemu_fail("reduction: output uid %lld dim %d = %lld does not divide input "
                             "dim %lld", (long long)y->uid, i, (long long)y->dim[i],
                             (long long)x->dim[i]);
        break;
    }
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
        cd_desc *x = op_tensor(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, 1, "reshape");
        cd_desc *y = op_tensor(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, 1, "reshape");
        if (cd_elems(x) != cd_elems(y))
            cudaemu_fail("reshape: uid %lld -> uid %lld changes the element count",
                         (long long)x->uid, (long long)y->uid);
        break;
    }
    default: break;
    }
}

/* The tensors an operation reads and writes. */
int cd_op_io(const cd_desc *op, cd_desc **in, cd_desc **out)
{
    int n = 0;
    static const int pw_in[] = { CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                 CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                 CUDNN_ATTR_OPERATION_POINTWISE_TDESC };
    static const int mm_in[] = { CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                                 CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
                                 CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
                                 CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC };
    const int *names = NULL;
    int count = 0, out_name = 0;
    switch (op->type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        names = pw_in, count = 3, out_name = CUDNN_ATTR_OPERATION_POINTWISE_YDESC;
        break;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        names = mm_in, count = 5, out_name = CUDNN_ATTR_OPERATION_MATMUL_CDESC;
        break;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
        static const int r[] = { CUDNN_ATTR_OPERATION_REDUCTION_XDESC };
        names = r, count = 1, out_name = CUDNN_ATTR_OPERATION_REDUCTION_YDESC;
        break;
    }
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
        static const int r[] = { CUDNN_ATTR_OPERATION_RESHAPE_XDESC };
        names = r, count = 1, out_name = CUDNN_ATTR_OPERATION_RESHAPE_YDESC;
        break;
    }
    default: cudaemu_fail("operation graph: descriptor type %d is not an emulated operation", op->type);
    }
    for (int i = 0; i < count; i++) {
        cd_desc *t = cd_attr_desc(op, names[i], 0);
        if (t) {
            in[n++] = t;
            if (t->ragged)
                in[n++] = t->ragged;
        }
    }
    *out = cd_attr_desc(op, out_name, 0);
    if ((*out)->ragged)
        in[n++] = (*out)->ragged;
    return n;
}

static void check_ragged_padding(const cd_desc *g);

/* Every virtual tensor is produced once and before it is read (in some order); one
 * descriptor per uid. */
void cd_finalize_graph(cd_desc *g)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (!ops)
        cudaemu_fail("operation graph: no operations");
    if (!cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE))
        cudaemu_fail("operation graph: no handle");
    int n = (int)ops->count;
    cd_desc *made[CD_MAX_OPS];
    if (n > CD_MAX_OPS)
        cudaemu_fail("operation graph: %d operations (the harness takes %d)", n, CD_MAX_OPS);
    for (int i = 0; i < n; i++) {
        cd_desc *in[16], *out;
        (void)cd_op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        made[i] = out;
        for (int j = 0; j < i; j++)
            if (made[j]->uid == out->uid)
                cudaemu_fail("operation graph: uid %lld is written by operations %d and %d",
                             (long long)out->uid, j, i);
    }
    for (int i = 0; i < n; i++) {
        cd_desc *in[16], *out;
        int k = cd_op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        for (int a = 0; a < k; a++) {
            int found = !in[a]->is_virtual;
            for (int j = 0; j < n && !found; j++)
                found = made[j] == in[a];
            for (int j = 0; j < n; j++)
                if (made[j] != in[a] && made[j]->uid == in[a]->uid)
                    cudaemu_fail("operation graph: uid %lld names two different tensors",
                                 (long long)in[a]->uid);
            if (!found)
                cudaemu_fail("operation graph: operation %d reads virtual uid %lld, which no "
                             "operation writes", i, (long long)in[a]->uid);
        }
    }
    check_ragged_padding(g);
}

/* cuDNN takes ragged (packed) tensors only with a padding mask: every matmul that reads
 * one is bounded by overrides, and the scores are compared (CMP_LT) with those lengths. */
static void check_ragged_padding(const cd_desc *g)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    int ragged = 0, masked = 0;
    for (int i = 0; i < ops->count; i++) {
        const cd_desc *op = cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i);
        cd_desc *in[16], *out;
        int k = cd_op_io(op, in, &out);
        for (int a = 0; a < k; a++)
            ragged |= in[a]->ragged != NULL;
        if (op->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
            const cd_desc *a = cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, 0);
            const cd_desc *b = cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, 0);
            if (((a->ragged || b->ragged) &&
                 !cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, 0)))
                cudaemu_fail("operation graph: matmul %d reads a ragged tensor without an m "
                             "override (the padding of each batch element)", i);
        }
        if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
            const cd_desc *pw = cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
            const cd_desc *b = cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0);
            masked |= *(const int32_t *)cd_attr_find(pw, CUDNN_ATTR_POINTWISE_MODE)->data ==
                          CUDNN_POINTWISE_CMP_LT && b && !b->is_virtual && !b->by_value;
        }
    }
    if (ragged && !masked)
        cudaemu_fail("operation graph: ragged tensors without a padding mask (scores compared "
                     "with each batch element's sequence lengths); cuDNN refuses such a graph");
}

/* The harness's engine: bf16 graphs whose bf16 tensors have feature dims <= 128. */
int cd_graph_supported(const cd_desc *g)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        int k = cd_op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        in[k++] = out;
        for (int a = 0; a < k; a++)
            if (!in[a]->is_virtual && in[a]->dtype == CUDNN_DATA_BFLOAT16)
                for (int dd = 0; dd < 4; dd++)
                    if (in[a]->stride[dd] == 1 && in[a]->dim[dd] > 128)
                        return 0;
    }
    return 1;
}

