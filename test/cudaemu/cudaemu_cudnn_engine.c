/* The harness's cuDNN engine: computes an operation graph by the definition of each
 * operation, in fp64, on logical [d0, d1, d2, d3] arrays (cudaemu_cudnn.h).
 *
 *  - Non-virtual inputs are read through their strides; a ragged tensor's batch element i
 *    starts at ragged[i] elements and holds (ragged[i+1] - ragged[i]) / (row stride) rows;
 *    rows past that are NaN, so a graph that lets them into a result (a missing override
 *    or padding mask) shows as NaN. Every document's span must lie in its allocation.
 *  - Values are rounded to each tensor's type when stored (bf16 to nearest even), as the
 *    engines store intermediates in the type the graph gives them.
 *  - Matmuls: batch dim 1 of B broadcasts by groups (GQA: head h reads B head
 *    h / (H / Hb)); rows and columns past the m/n overrides take the padding value (a
 *    non-virtual output is not written there), the sum stops at the k override.
 *  - Non-virtual outputs: ragged rows past a document's length are not written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu.h"
#include "cudaemu_cudnn.h"

typedef struct val {
    const cd_desc *t;
    double *v;
    unsigned char *skip; /* non-virtual matmul outputs: rows past the m override */
} val;

typedef struct ctx {
    const cd_binding *b;
    int nb;
    val vals[256];
    int n;
} ctx;

static const cd_binding *binding(const ctx *c, int64_t uid)
{
    for (int i = 0; i < c->nb; i++)
        if (c->b[i].uid == uid)
            return &c->b[i];
    cudaemu_fail("cudnnBackendExecute: uid %lld has no binding", (long long)uid);
}

static val *find(ctx *c, const cd_desc *t)
{
    for (int i = 0; i < c->n; i++)
        if (c->vals[i].t == t)
            return &c->vals[i];
    return NULL;
}

static val *fresh(ctx *c, const cd_desc *t)
{
    if (c->n == 256)
        cudaemu_fail("cudnn graph: too many tensors");
    val *v = &c->vals[c->n++];
    v->t = t;
    v->v = malloc((size_t)cd_elems(t) * sizeof(double));
    v->skip = NULL;
    if (!v->v)
        cudaemu_fail("cudnn graph: out of host memory");
    return v;
}

static double round_to(int dtype, double x)
{
    switch (dtype) {
    case CUDNN_DATA_FLOAT: return (float)x;
    case CUDNN_DATA_INT32: return isnan(x) ? x : (double)(int32_t)x;
    case CUDNN_DATA_BOOLEAN: return x != 0;
    case CUDNN_DATA_BFLOAT16: {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            return f;
        u = (u + 0x7fffu + ((u >> 16) & 1)) & 0xffff0000u;
        memcpy(&f, &u, 4);
        return f;
    }
    default: return x;
    }
}

static int64_t ival(ctx *c, const cd_desc *t, int64_t i)
{
    const void *p = binding(c, t->uid)->ptr;
    return t->dtype == CUDNN_DATA_INT64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* The row axis of a ragged tensor: the larger stride of dims 2 and 3. */
static int row_axis(const cd_desc *t) { return t->stride[2] > t->stride[3] ? 2 : 3; }

/* Where batch element i0 starts (elements) and how many rows it holds. */
static void element_span(ctx *c, const cd_desc *t, void *p, int64_t i0, int64_t *start,
                         int64_t *rows)
{
    if (!t->ragged) {
        *start = i0 * t->stride[0];
        *rows = t->dim[row_axis(t)];
        return;
    }
    int64_t a = ival(c, t->ragged, i0), b = ival(c, t->ragged, i0 + 1);
    int ax = row_axis(t);
    if (a < 0 || b < a || (b - a) % t->stride[ax])
        cudaemu_fail("cudnnBackendExecute: tensor uid %lld: ragged offsets [%lld] = %lld, [%lld] "
                     "= %lld are not a whole number of rows (row stride %lld)",
                     (long long)t->uid, (long long)i0, (long long)a, (long long)i0 + 1,
                     (long long)b, (long long)t->stride[ax]);
    *start = a;
    *rows = (b - a) / t->stride[ax];
    if (*rows > t->dim[ax])
        cudaemu_fail("cudnnBackendExecute: tensor uid %lld: batch element %lld holds %lld rows, "
                     "more than its dim %lld", (long long)t->uid, (long long)i0, (long long)*rows,
                     (long long)t->dim[ax]);
    if (*rows > 0) {
        int64_t last = a + (*rows - 1) * t->stride[ax];
        for (int k = 1; k < 4; k++)
            if (k != ax)
                last += (t->dim[k] - 1) * t->stride[k];
        size_t es = cd_type_size(t->dtype);
        cudaemu_check_device_range((char *)p + a * es, (size_t)(last - a + 1) * es,
                                   "cudnnBackendExecute", "a ragged document");
    }
}

static double load1(const cd_desc *t, const void *p, int64_t off)
{
    switch (t->dtype) {
    case CUDNN_DATA_FLOAT: return ((const float *)p)[off];
    case CUDNN_DATA_INT32: return ((const int32_t *)p)[off];
    case CUDNN_DATA_INT64: return (double)((const int64_t *)p)[off];
    case CUDNN_DATA_BFLOAT16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[off] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: return ((const unsigned char *)p)[off];
    }
}

static void store1(const cd_desc *t, void *p, int64_t off, double x)
{
    x = round_to(t->dtype, x);
    switch (t->dtype) {
    case CUDNN_DATA_FLOAT: ((float *)p)[off] = (float)x; break;
    case CUDNN_DATA_INT32: ((int32_t *)p)[off] = (int32_t)x; break;
    case CUDNN_DATA_BFLOAT16: {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[off] = (uint16_t)(u >> 16);
        break;
    }
    default: cudaemu_fail("cudnn graph: storing type %d is not emulated", t->dtype);
    }
}

#define FOR4(t, i)                                                                                 \
    for (int64_t i##0 = 0; i##0 < (t)->dim[0]; i##0++)                                             \
        for (int64_t i##1 = 0; i##1 < (t)->dim[1]; i##1++)                                         \
            for (int64_t i##2 = 0; i##2 < (t)->dim[2]; i##2++)                                     \
                for (int64_t i##3 = 0; i##3 < (t)->dim[3]; i##3++)

static int64_t lin(const cd_desc *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return ((a * t->dim[1] + b) * t->dim[2] + c) * t->dim[3] + d;
}

static val *load(ctx *c, const cd_desc *t)
{
    val *v = fresh(c, t);
    const cd_binding *bd = binding(c, t->uid);
    if (t->by_value) {
        v->v[0] = bd->value;
        return v;
    }
    int ax = row_axis(t);
    for (int64_t i0 = 0; i0 < t->dim[0]; i0++) {
        int64_t start, rows;
        element_span(c, t, bd->ptr, i0, &start, &rows);
        for (int64_t i1 = 0; i1 < t->dim[1]; i1++)
            for (int64_t i2 = 0; i2 < t->dim[2]; i2++)
                for (int64_t i3 = 0; i3 < t->dim[3]; i3++) {
                    int64_t r = ax == 2 ? i2 : i3;
                    int64_t off = start + i1 * t->stride[1] + i2 * t->stride[2] + i3 * t->stride[3];
                    v->v[lin(t, i0, i1, i2, i3)] = r < rows || !t->ragged ? load1(t, bd->ptr, off)
                                                                           : NAN;
                }
    }
    return v;
}

static void store(ctx *c, const val *v)
{
    const cd_desc *t = v->t;
    const cd_binding *bd = binding(c, t->uid);
    int ax = row_axis(t);
    for (int64_t i0 = 0; i0 < t->dim[0]; i0++) {
        int64_t start, rows;
        element_span(c, t, bd->ptr, i0, &start, &rows);
        for (int64_t i1 = 0; i1 < t->dim[1]; i1++)
            for (int64_t i2 = 0; i2 < t->dim[2]; i2++)
                for (int64_t i3 = 0; i3 < t->dim[3]; i3++) {
                    int64_t l = lin(t, i0, i1, i2, i3), r = ax == 2 ? i2 : i3;
                    if ((t->ragged && r >= rows) || (v->skip && v->skip[l]))
                        continue;
                    store1(t, bd->ptr, start + i1 * t->stride[1] + i2 * t->stride[2] +
                                           i3 * t->stride[3], v->v[l]);
                }
    }
}

/* Value of input x at the output index (broadcast dims read index 0). */
static double at(const val *x, int64_t a, int64_t b, int64_t c, int64_t d)
{
    const cd_desc *t = x->t;
    return x->v[lin(t, t->dim[0] == 1 ? 0 : a, t->dim[1] == 1 ? 0 : b, t->dim[2] == 1 ? 0 : c,
                    t->dim[3] == 1 ? 0 : d)];
}

static void run_pointwise(ctx *c, const cd_desc *op, val *y)
{
    const cd_desc *pw = cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
    int mode = *(const int32_t *)cd_attr_find(pw, CUDNN_ATTR_POINTWISE_MODE)->data;
    const cd_attr *axa = cd_attr_find(pw, CUDNN_ATTR_POINTWISE_AXIS);
    int64_t axis = axa ? *(const int64_t *)axa->data : -1;
    val *x = find(c, cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, 0));
    const cd_desc *bt = cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0);
    const cd_desc *tt = cd_attr_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, 0);
    val *b = bt ? find(c, bt) : NULL, *t = tt ? find(c, tt) : NULL;
    const cd_desc *yt = y->t;
    FOR4(yt, i)
    {
        double xv = at(x, i0, i1, i2, i3), bv = b ? at(b, i0, i1, i2, i3) : 0, r;
        int64_t idx[4] = { i0, i1, i2, i3 };
        switch (mode) {
        case CUDNN_POINTWISE_ADD: r = xv + bv; break;
        case CUDNN_POINTWISE_SUB: r = xv - bv; break;
        case CUDNN_POINTWISE_MUL: r = xv * bv; break;
        case CUDNN_POINTWISE_DIV: r = xv / bv; break;
        case CUDNN_POINTWISE_EXP: r = exp(xv); break;
        case CUDNN_POINTWISE_LOG: r = log(xv); break;
        case CUDNN_POINTWISE_IDENTITY: r = xv; break;
        case CUDNN_POINTWISE_CMP_GE: r = xv >= bv; break;
        case CUDNN_POINTWISE_CMP_GT: r = xv > bv; break;
        case CUDNN_POINTWISE_CMP_LT: r = xv < bv; break;
        case CUDNN_POINTWISE_LOGICAL_AND: r = xv != 0 && bv != 0; break;
        case CUDNN_POINTWISE_BINARY_SELECT: r = at(t, i0, i1, i2, i3) != 0 ? xv : bv; break;
        case CUDNN_POINTWISE_GEN_INDEX: r = (double)idx[axis]; break;
        default: cudaemu_fail("cudnn graph: pointwise mode %d is not emulated", mode);
        }
        y->v[lin(yt, i0, i1, i2, i3)] = round_to(yt->dtype, r);
    }
}

static void run_matmul(ctx *c, const cd_desc *op, val *cv)
{
    val *a = find(c, cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, 0));
    val *b = find(c, cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, 0));
    const cd_desc *mm = cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, 0);
    const cd_attr *pad = cd_attr_find(mm, CUDNN_ATTR_MATMUL_PADDING_VALUE);
    double padding = pad ? *(const double *)pad->data : 0.0;
    const cd_desc *ov[3] = { cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, 0),
                             cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, 0),
                             cd_attr_desc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, 0) };
    const cd_desc *ct = cv->t, *at_ = a->t, *bt = b->t;
    int64_t K = at_->dim[3], group = ct->dim[1] / bt->dim[1];
    if (!ct->is_virtual && ov[0])
        cv->skip = calloc((size_t)cd_elems(ct), 1);
    for (int64_t i0 = 0; i0 < ct->dim[0]; i0++) {
        int64_t m_end = ov[0] ? ival(c, ov[0], i0) : ct->dim[2];
        int64_t n_end = ov[1] ? ival(c, ov[1], i0) : ct->dim[3];
        int64_t k_end = ov[2] ? ival(c, ov[2], i0) : K;
        if (m_end < 0 || n_end < 0 || k_end < 0 || m_end > ct->dim[2] || n_end > ct->dim[3] ||
            k_end > K)
            cudaemu_fail("cudnnBackendExecute: matmul overrides m=%lld n=%lld k=%lld of batch "
                         "element %lld exceed its dims", (long long)m_end, (long long)n_end,
                         (long long)k_end, (long long)i0);
        for (int64_t h = 0; h < ct->dim[1]; h++)
            for (int64_t m = 0; m < ct->dim[2]; m++)
                for (int64_t n = 0; n < ct->dim[3]; n++) {
                    int64_t l = lin(ct, i0, h, m, n);
                    if (m >= m_end || n >= n_end) {
                        cv->v[l] = padding;
                        if (cv->skip && m >= m_end)
                            cv->skip[l] = 1;
                        continue;
                    }
                    double s = 0;
                    for (int64_t k = 0; k < k_end; k++)
                        s += a->v[lin(at_, i0, h, m, k)] * b->v[lin(bt, i0, h / group, k, n)];
                    cv->v[l] = round_to(ct->dtype, s);
                }
    }
}

static void run_reduction(ctx *c, const cd_desc *op, val *y)
{
    val *x = find(c, cd_attr_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, 0));
    const cd_desc *rd = cd_attr_desc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, 0);
    int how = *(const int32_t *)cd_attr_find(rd, CUDNN_ATTR_REDUCTION_OPERATOR)->data;
    if (how != CUDNN_REDUCE_TENSOR_ADD && how != CUDNN_REDUCE_TENSOR_MAX)
        cudaemu_fail("cudnn graph: reduction %d is not emulated", how);
    const cd_desc *xt = x->t, *yt = y->t;
    for (int64_t i = 0; i < cd_elems(yt); i++)
        y->v[i] = how == CUDNN_REDUCE_TENSOR_MAX ? -INFINITY : 0;
    int64_t g[4];
    for (int k = 0; k < 4; k++)
        g[k] = xt->dim[k] / yt->dim[k];
    FOR4(xt, i)
    {
        double *o = &y->v[lin(yt, i0 / g[0], i1 / g[1], i2 / g[2], i3 / g[3])];
        double xv = x->v[lin(xt, i0, i1, i2, i3)];
        *o = how == CUDNN_REDUCE_TENSOR_MAX ? (xv > *o ? xv : *o) : *o + xv;
    }
    for (int64_t i = 0; i < cd_elems(yt); i++)
        y->v[i] = round_to(yt->dtype, y->v[i]);
}

/* The same memory read through y's dims and strides. */
static void run_reshape(ctx *c, const cd_desc *op, val *y)
{
    val *x = find(c, cd_attr_desc(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, 0));
    const cd_desc *xt = x->t, *yt = y->t;
    int64_t span = 1;
    for (int k = 0; k < 4; k++)
        span += (xt->dim[k] - 1) * xt->stride[k];
    double *mem = malloc((size_t)span * sizeof *mem);
    FOR4(xt, i)
    mem[i0 * xt->stride[0] + i1 * xt->stride[1] + i2 * xt->stride[2] + i3 * xt->stride[3]] =
        x->v[lin(xt, i0, i1, i2, i3)];
    FOR4(yt, i)
    {
        int64_t off = i0 * yt->stride[0] + i1 * yt->stride[1] + i2 * yt->stride[2] +
                      i3 * yt->stride[3];
        if (off >= span)
            cudaemu_fail("cudnn graph: reshape uid %lld reads past its input uid %lld",
                         (long long)yt->uid, (long long)xt->uid);
        y->v[lin(yt, i0, i1, i2, i3)] = round_to(yt->dtype, mem[off]);
    }
    free(mem);
}

static const cd_desc *op_out(const cd_desc *op)
{
    int name = op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR ? CUDNN_ATTR_OPERATION_POINTWISE_YDESC
               : op->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR ? CUDNN_ATTR_OPERATION_MATMUL_CDESC
               : op->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR
                   ? CUDNN_ATTR_OPERATION_REDUCTION_YDESC
                   : CUDNN_ATTR_OPERATION_RESHAPE_YDESC;
    return cd_attr_desc(op, name, 0);
}

/* Inputs ready: each is computed, or non-virtual and written by no operation (then loaded). */
static int ready(ctx *c, const cd_desc *graph, const cd_attr *ops, const cd_desc *op)
{
    static const int names[] = { CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                 CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
                                 CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                                 CUDNN_ATTR_OPERATION_RESHAPE_XDESC };
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const cd_desc *t = cd_attr_desc(op, names[k], 0);
        if (!t || find(c, t))
            continue;
        int produced = 0;
        for (int i = 0; i < ops->count && !produced; i++)
            produced = op_out(cd_attr_desc(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, i)) == t;
        if (produced || t->is_virtual)
            return 0;
        load(c, t);
    }
    return 1;
}

void cd_execute_graph(const cd_desc *graph, const cd_binding *b, int n)
{
    ctx *c = calloc(1, sizeof *c);
    c->b = b;
    c->nb = n;
    const cd_attr *ops = cd_attr_find(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    unsigned char done[CD_MAX_OPS] = { 0 };
    for (int left = (int)ops->count; left > 0;) {
        int progress = 0;
        for (int i = 0; i < ops->count; i++) {
            const cd_desc *op = cd_attr_desc(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, i);
            if (done[i] || !ready(c, graph, ops, op))
                continue;
            val *y = fresh(c, op_out(op));
            switch (op->type) {
            case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: run_pointwise(c, op, y); break;
            case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: run_matmul(c, op, y); break;
            case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: run_reduction(c, op, y); break;
            default: run_reshape(c, op, y); break;
            }
            if (!y->t->is_virtual)
                store(c, y);
            done[i] = 1;
            left--;
            progress = 1;
        }
        if (!progress)
            cudaemu_fail("cudnn graph: operations wait on each other (a cycle)");
    }
    for (int i = 0; i < c->n; i++) {
        free(c->vals[i].v);
        free(c->vals[i].skip);
    }
    free(c);
}
