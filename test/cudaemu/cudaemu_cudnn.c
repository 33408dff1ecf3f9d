/* The CPU execution harness's cuDNN backend API: handles, descriptors, attributes,
 * finalize, heuristics, plans, variant packs and execute (cudaemu_cudnn.h).
 *
 * Every misuse a real cuDNN would answer with an error status (a wrong attribute type, a
 * descriptor that is not finalized, a virtual tensor nobody produces, a shape that does
 * not broadcast, a uid missing from the variant pack, a too-small workspace, a
 * misaligned or dead pointer) is a finding here (cudaemu_fail): the backend would fall
 * back to its own kernels in silence, so a defect in the graph it builds must stop the
 * test instead. Emulated support: bf16 data with feature dimensions up to 128 (the
 * stride-1 dim of every bf16 tensor the graph binds); anything else gets no engine from
 * the heuristics, as cuDNN answers, and the backend falls back. */
#include "cudaemu_cudnn.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu.h"

#define CD_MAGIC 0xcd9a11u
#define HANDLE_MAGIC 0xcd9a12u

struct cudnnContext {
    uint32_t magic;
    cudaStream_t stream;
};

static cd_desc *desc_of(const void *p)
{
    cd_desc *d = (cd_desc *)p;
    return d && d->magic == CD_MAGIC ? d : NULL;
}

static cudnnHandle_t handle_of(cudnnHandle_t h) { return h && h->magic == HANDLE_MAGIC ? h : NULL; }

size_t cd_type_size(int t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_BFLOAT16: case CUDNN_DATA_HALF: return 2;
    case CUDNN_DATA_INT64: case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 0;
    }
}

int64_t cd_elems(const cd_desc *t)
{
    return t->dim[0] * t->dim[1] * t->dim[2] * t->dim[3];
}

/* ---------------------------------------------------------------- handle */

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
           : s == CUDNN_STATUS_NOT_SUPPORTED ? "CUDNN_STATUS_NOT_SUPPORTED"
           : s == CUDNN_STATUS_BAD_PARAM ? "CUDNN_STATUS_BAD_PARAM"
                                          : "CUDNN_STATUS_INTERNAL_ERROR";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    *h = calloc(1, sizeof **h);
    if (!*h)
        return CUDNN_STATUS_ALLOC_FAILED;
    (*h)->magic = HANDLE_MAGIC;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    if (!handle_of(h))
        cudaemu_fail("cudnnDestroy: not a live handle");
    h->magic = 0;
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    if (!handle_of(h))
        cudaemu_fail("cudnnSetStream: not a live handle");
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- descriptors */

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out)
{
    cd_desc *d = calloc(1, sizeof *d);
    if (!out || !d)
        cudaemu_fail("cudnnBackendCreateDescriptor: NULL output or out of host memory");
    d->magic = CD_MAGIC;
    d->type = (int)type;
    *out = (cudnnBackendDescriptor_t)d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p)
{
    cd_desc *d = desc_of(p);
    if (!d)
        cudaemu_fail("cudnnBackendDestroyDescriptor: %p is not a live descriptor", (void *)p);
    for (int i = 0; i < d->n_attrs; i++)
        free(d->attrs[i].data);
    d->magic = 0;
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

const cd_attr *cd_attr_find(const cd_desc *d, int name)
{
    for (int i = 0; i < d->n_attrs; i++)
        if (d->attrs[i].name == name)
            return &d->attrs[i];
    return NULL;
}

cd_desc *cd_attr_desc(const cd_desc *d, int name, int index)
{
    const cd_attr *a = cd_attr_find(d, name);
    if (!a || index >= a->count)
        return NULL;
    return desc_of(((void **)a->data)[index]);
}

static size_t attr_type_size(int t)
{
    switch (t) {
    case CUDNN_TYPE_INT64: return 8;
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_FLOAT: return 4;
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_HANDLE: case CUDNN_TYPE_VOID_PTR: case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return sizeof(void *);
    default: return 4; /* the enums */
    }
}

/* The attribute type each (descriptor, attribute) takes; -1 if the harness does not know the
 * attribute (a finding: the stand-in must validate everything the backend sets). */
static int expected_type(int desc, int name)
{
    switch (name) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: case CUDNN_ATTR_POINTWISE_MATH_PREC:
    case CUDNN_ATTR_MATMUL_COMP_TYPE: case CUDNN_ATTR_REDUCTION_COMP_TYPE:
        return CUDNN_TYPE_DATA_TYPE;
    case CUDNN_ATTR_TENSOR_DIMENSIONS: case CUDNN_ATTR_TENSOR_STRIDES:
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
    case CUDNN_ATTR_POINTWISE_AXIS: case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
        return CUDNN_TYPE_INT64;
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: case CUDNN_ATTR_TENSOR_IS_BY_VALUE: return CUDNN_TYPE_BOOLEAN;
    case CUDNN_ATTR_POINTWISE_MODE: return CUDNN_TYPE_POINTWISE_MODE;
    case CUDNN_ATTR_MATMUL_PADDING_VALUE: return CUDNN_TYPE_DOUBLE;
    case CUDNN_ATTR_REDUCTION_OPERATOR: return CUDNN_TYPE_REDUCTION_OPERATOR_TYPE;
    case CUDNN_ATTR_ENGINEHEUR_MODE: return CUDNN_TYPE_HEUR_MODE;
    case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
        return CUDNN_TYPE_HANDLE;
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
        return CUDNN_TYPE_VOID_PTR;
    case CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: case CUDNN_ATTR_OPERATION_POINTWISE_XDESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: case CUDNN_ATTR_OPERATION_POINTWISE_YDESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_TDESC:
    case CUDNN_ATTR_OPERATION_MATMUL_ADESC: case CUDNN_ATTR_OPERATION_MATMUL_BDESC:
    case CUDNN_ATTR_OPERATION_MATMUL_CDESC: case CUDNN_ATTR_OPERATION_MATMUL_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_REDUCTION_XDESC: case CUDNN_ATTR_OPERATION_REDUCTION_YDESC:
    case CUDNN_ATTR_OPERATION_REDUCTION_DESC:
    case CUDNN_ATTR_OPERATION_RESHAPE_XDESC: case CUDNN_ATTR_OPERATION_RESHAPE_YDESC:
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
        return CUDNN_TYPE_BACKEND_DESCRIPTOR;
    default: (void)desc; return -1;
    }
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *value)
{
    cd_desc *d = desc_of(p);
    if (!d)
        cudaemu_fail("cudnnBackendSetAttribute(%d): not a live descriptor", (int)name);
    if (d->finalized)
        cudaemu_fail("cudnnBackendSetAttribute(%d): descriptor (type %d) already finalized",
                     (int)name, d->type);
    int want = expected_type(d->type, (int)name);
    if (want < 0)
        cudaemu_fail("cudnnBackendSetAttribute: attribute %d on descriptor type %d is not one the "
                     "harness validates", (int)name, d->type);
    if ((int)type != want)
        cudaemu_fail("cudnnBackendSetAttribute(%d): attribute type %d, cuDNN takes %d", (int)name,
                     (int)type, want);
    if (count <= 0 || !value)
        cudaemu_fail("cudnnBackendSetAttribute(%d): %lld elements at %p", (int)name,
                     (long long)count, value);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++) {
            cd_desc *v = desc_of(((void *const *)value)[i]);
            if (!v || !v->finalized)
                cudaemu_fail("cudnnBackendSetAttribute(%d): element %lld is not a finalized "
                             "descriptor", (int)name, (long long)i);
        }
    cd_attr *a = (cd_attr *)cd_attr_find(d, (int)name);
    if (!a) {
        if (d->n_attrs == CD_MAX_ATTRS)
            cudaemu_fail("cudnnBackendSetAttribute: too many attributes");
        a = &d->attrs[d->n_attrs++];
    } else {
        free(a->data);
    }
    size_t bytes = attr_type_size(type) * (size_t)count;
    a->name = (int)name;
    a->type = (int)type;
    a->count = count;
    a->data = malloc(bytes);
    memcpy(a->data, value, bytes);
    return CUDNN_STATUS_SUCCESS;
}

static const void *need(const cd_desc *d, int name, int64_t count, const char *what)
{
    const cd_attr *a = cd_attr_find(d, name);
    if (!a)
        cudaemu_fail("cudnnBackendFinalize(%s): attribute %d not set", what, name);
    if (count > 0 && a->count != count)
        cudaemu_fail("cudnnBackendFinalize(%s): attribute %d has %lld elements, needs %lld", what,
                     name, (long long)a->count, (long long)count);
    return a->data;
}

static int64_t int_attr(const cd_desc *d, int name, int64_t dflt)
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

static void finalize_tensor(cd_desc *d)
{
    d->dtype = *(const int32_t *)need(d, CUDNN_ATTR_TENSOR_DATA_TYPE, 1, "tensor");
    const int64_t *dim = need(d, CUDNN_ATTR_TENSOR_DIMENSIONS, 4, "tensor (4 dims)");
    const int64_t *str = need(d, CUDNN_ATTR_TENSOR_STRIDES, 4, "tensor (4 strides)");
    d->uid = *(const int64_t *)need(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 1, "tensor");
    d->align = *(const int64_t *)need(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 1, "tensor");
    d->is_virtual = (int)int_attr(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, 0);
    d->by_value = (int)int_attr(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, 0);
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

static void finalize_op(cd_desc *d)
{
    switch (d->type) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        const cd_desc *pw = cd_attr_desc(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
        if (!pw || pw->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR)
            cudaemu_fail("pointwise operation without a pointwise descriptor");
        int mode = (int)int_attr(pw, CUDNN_ATTR_POINTWISE_MODE, -1);
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
            int64_t axis = int_attr(pw, CUDNN_ATTR_POINTWISE_AXIS, -1);
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
static int op_io(const cd_desc *op, cd_desc **in, cd_desc **out)
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
static void finalize_graph(cd_desc *g)
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
        (void)op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        made[i] = out;
        for (int j = 0; j < i; j++)
            if (made[j]->uid == out->uid)
                cudaemu_fail("operation graph: uid %lld is written by operations %d and %d",
                             (long long)out->uid, j, i);
    }
    for (int i = 0; i < n; i++) {
        cd_desc *in[16], *out;
        int k = op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
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
        int k = op_io(op, in, &out);
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
static int graph_supported(const cd_desc *g)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        int k = op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        in[k++] = out;
        for (int a = 0; a < k; a++)
            if (!in[a]->is_virtual && in[a]->dtype == CUDNN_DATA_BFLOAT16)
                for (int dd = 0; dd < 4; dd++)
                    if (in[a]->stride[dd] == 1 && in[a]->dim[dd] > 128)
                        return 0;
    }
    return 1;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p)
{
    cd_desc *d = desc_of(p);
    if (!d || d->finalized)
        cudaemu_fail("cudnnBackendFinalize: not a live descriptor, or finalized twice");
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: finalize_tensor(d); break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        need(d, CUDNN_ATTR_POINTWISE_MODE, 1, "pointwise");
        need(d, CUDNN_ATTR_POINTWISE_MATH_PREC, 1, "pointwise");
        break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: need(d, CUDNN_ATTR_MATMUL_COMP_TYPE, 1, "matmul"); break;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        need(d, CUDNN_ATTR_REDUCTION_OPERATOR, 1, "reduction");
        need(d, CUDNN_ATTR_REDUCTION_COMP_TYPE, 1, "reduction");
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: finalize_graph(d); break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        need(d, CUDNN_ATTR_ENGINEHEUR_MODE, 1, "heuristics");
        d->graph = cd_attr_desc(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, 0);
        if (!d->graph)
            cudaemu_fail("cudnnBackendFinalize(heuristics): no operation graph");
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        const cd_desc *cfg = cd_attr_desc(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
        if (!cfg || !cfg->graph || !cd_attr_find(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE))
            cudaemu_fail("cudnnBackendFinalize(plan): needs a handle and an engine config from "
                         "the heuristics");
        d->graph = cfg->graph;
        /* a workspace the caller must provide: 1 KiB per operation */
        d->workspace = 1024 * cd_attr_find(d->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS)->count;
        break;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        const cd_attr *u = cd_attr_find(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
        const cd_attr *ptr = cd_attr_find(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        if (!u || !ptr || u->count != ptr->count)
            cudaemu_fail("variant pack: uids and data pointers missing or of different counts");
        break;
    }
    default: finalize_op(d); break;
    }
    d->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *out)
{
    cd_desc *d = desc_of(p);
    if (!d || !d->finalized)
        cudaemu_fail("cudnnBackendGetAttribute(%d): not a finalized descriptor", (int)name);
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
        type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        int64_t offered = graph_supported(d->graph) ? 1 : 0;
        if (count)
            *count = requested == 0 || requested > offered ? offered : requested;
        for (int64_t i = 0; i < requested && i < offered; i++) {
            cd_desc *cfg = desc_of(((void **)out)[i]);
            if (!cfg || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                cudaemu_fail("heuristics results: element %lld is not an engine config "
                             "descriptor", (long long)i);
            cfg->graph = d->graph;
            cfg->finalized = 1;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 &&
        requested >= 1) {
        *(int64_t *)out = d->workspace;
        if (count)
            *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    cudaemu_fail("cudnnBackendGetAttribute(%d, type %d) on descriptor type %d is not emulated",
                 (int)name, (int)type, d->type);
}

/* ---------------------------------------------------------------- execute */

static long executions; /* for tests: which path an attention call took */

long cudaemu_cudnn_executions(void) { return executions; }

typedef struct exec_work {
    const cd_desc *graph;
    cd_binding *b;
    int n;
    void *workspace;
    size_t workspace_bytes;
} exec_work;

/* The engine owns its workspace while it runs: poisoned first, so a workspace that the
 * caller made too small overwrites whatever follows it (as on a GPU) and shows. */
static void run_exec(void *ctx)
{
    exec_work *w = ctx;
    if (w->workspace)
        memset(w->workspace, 0xff, w->workspace_bytes);
    cd_execute_graph(w->graph, w->b, w->n);
}

static void free_exec(void *ctx)
{
    exec_work *w = ctx;
    free(w->b);
    free(w);
}

/* Bytes a non-ragged tensor spans from its pointer. */
static size_t extent(const cd_desc *t)
{
    int64_t last = 0;
    for (int i = 0; i < 4; i++)
        last += (t->dim[i] - 1) * t->stride[i];
    return (size_t)(last + 1) * cd_type_size(t->dtype);
}

/* Collects the graph's distinct non-virtual tensors. */
static int graph_tensors(const cd_desc *g, const cd_desc **list, int max)
{
    int n = 0;
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        int k = op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        in[k++] = out;
        for (int a = 0; a < k; a++) {
            int seen = in[a]->is_virtual;
            for (int j = 0; j < n && !seen; j++)
                seen = list[j]->uid == in[a]->uid;
            if (!seen) {
                if (n == max)
                    cudaemu_fail("cudnnBackendExecute: more than %d bound tensors", max);
                list[n++] = in[a];
            }
        }
    }
    return n;
}

static int is_output(const cd_desc *g, const cd_desc *t)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        (void)op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        if (out == t)
            return 1;
    }
    return 0;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan_p,
                                  cudnnBackendDescriptor_t pack_p)
{
    const cd_desc *plan = desc_of(plan_p), *pack = desc_of(pack_p);
    if (!handle_of(h))
        cudaemu_fail("cudnnBackendExecute: not a live handle");
    if (!plan || !plan->finalized || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        cudaemu_fail("cudnnBackendExecute: not a finalized execution plan");
    if (!pack || !pack->finalized || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        cudaemu_fail("cudnnBackendExecute: not a finalized variant pack");
    const cd_attr *ua = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const cd_attr *pa = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    const int64_t *uids = ua->data;
    void *const *ptrs = pa->data;
    const cd_attr *wa = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE);
    void *ws = wa ? *(void **)wa->data : NULL;

    const cd_desc *list[64];
    int n = graph_tensors(plan->graph, list, 64);
    exec_work *w = calloc(1, sizeof *w);
    w->graph = plan->graph;
    w->b = calloc((size_t)n, sizeof *w->b);
    w->n = n;
    cudaemu_access acc[66];
    int n_acc = 0;
    for (int i = 0; i < n; i++) {
        const cd_desc *t = list[i];
        int hit = -1;
        for (int j = 0; j < ua->count; j++)
            if (uids[j] == t->uid) {
                if (hit >= 0)
                    cudaemu_fail("cudnnBackendExecute: uid %lld is bound twice in the variant "
                                 "pack", (long long)t->uid);
                hit = j;
            }
        if (hit < 0)
            cudaemu_fail("cudnnBackendExecute: the graph's tensor uid %lld is missing from the "
                         "variant pack", (long long)t->uid);
        void *p = ptrs[hit];
        w->b[i].uid = t->uid;
        w->b[i].ptr = p;
        if (!p)
            cudaemu_fail("cudnnBackendExecute: uid %lld is bound to NULL", (long long)t->uid);
        if (t->by_value) {
            void *base;
            size_t bytes;
            if (cudaemu_find_alloc(p, &base, &bytes) == 0)
                cudaemu_fail("cudnnBackendExecute: by-value uid %lld points to device memory "
                             "(its value is read on the host at execute)", (long long)t->uid);
            w->b[i].value = t->dtype == CUDNN_DATA_FLOAT ? *(const float *)p
                            : t->dtype == CUDNN_DATA_INT32 ? *(const int32_t *)p
                                                           : *(const double *)p;
            continue;
        }
        if ((uintptr_t)p % (uintptr_t)t->align)
            cudaemu_fail("cudnnBackendExecute: uid %lld = %p is not %lld-byte aligned as its "
                         "descriptor promises", (long long)t->uid, p, (long long)t->align);
        size_t bytes = extent(t);
        if (t->ragged) { /* the offsets are read when the work runs: the whole allocation */
            void *base;
            if (cudaemu_find_alloc(p, &base, &bytes) != 0)
                cudaemu_fail("cudnnBackendExecute: uid %lld = %p is not device memory",
                             (long long)t->uid, p);
            bytes -= (size_t)((char *)p - (char *)base);
        }
        cudaemu_check_device_range(p, bytes, "cudnnBackendExecute", "a bound tensor");
        acc[n_acc++] = (cudaemu_access){ p, bytes, is_output(plan->graph, t) };
    }
    for (int j = 0; j < ua->count; j++) {
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = list[i]->uid == uids[j];
        if (!known)
            cudaemu_fail("cudnnBackendExecute: the variant pack binds uid %lld, which the graph "
                         "does not have", (long long)uids[j]);
    }
    if (plan->workspace > 0) {
        if (!ws)
            cudaemu_fail("cudnnBackendExecute: the plan needs %lld bytes of workspace, the "
                         "variant pack has none", (long long)plan->workspace);
        cudaemu_check_device_range(ws, (size_t)plan->workspace, "cudnnBackendExecute",
                                   "workspace (smaller than the plan's size?)");
        acc[n_acc++] = (cudaemu_access){ ws, (size_t)plan->workspace, 1 };
        w->workspace = ws;
        w->workspace_bytes = (size_t)plan->workspace;
    }
    executions++;
    cudaemu_enqueue(h->stream, "cudnnBackendExecute", run_exec, w, free_exec, acc, n_acc);
    return CUDNN_STATUS_SUCCESS;
}
