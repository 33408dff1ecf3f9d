/* The operation graphs of scaled-dot-product attention on cuDNN's backend API.
 *
 * cuDNN (9.x before 9.21) has no single descriptor for masked attention; its fused flash
 * attention engines recognise a graph of primitive operations instead, the one
 * cudnn-frontend's SDPA node lowers to. This file builds that graph itself, in the order
 * and with the types those engines expect (studied from cudnn-frontend; written here).
 *
 * Layout. ftmpi's q is [tokens, hq*d] with tokens = batch-major rows of seq_len: as cuDNN
 * tensor [b, hq, s, d] its strides are {s*hq*d, d, hq*d, 1} (BSHD in memory). k and v
 * likewise with hkv. K enters the first matmul transposed ([b, hkv, d, s], strides of dims
 * 2 and 3 swapped); a query head h reads kv head h / (hq/hkv), which is how cuDNN
 * broadcasts a matmul's head dimension for GQA. Packed documents (ragged): b is the number
 * of documents, s the longest, and each of Q, K, V, O (and the gradients) carries a ragged
 * offset tensor [b+1] holding the element offset where document i starts; SEQ_Q/SEQ_KV
 * hold each document's length, which bound the matmuls (m/n/k overrides) and mask the
 * scores beyond it (padding mask), so no document reads or writes past its end.
 *
 * Forward (scores S are fp32 and virtual: they never reach memory):
 *   S = Q K^T * scale
 *   [ragged] S = (row < seq_q && col < seq_kv) ? S : -inf
 *   S = (row >= col) ? S : -inf                        causal, top-left aligned
 *   [window] S = (col + window > row) ? S : -inf       i - window < j
 *   M = rowmax(S); E = exp(S - M); L = rowsum(E); STATS = M + log(L)
 *   P = E / L (bf16); O = P V
 * Backward (the flash-attention backward as a graph; P recomputed from STATS):
 *   D = rowsum(dO * O)                                  (the softmax_sum workspace)
 *   P = exp(mask(Q K^T * scale) - STATS)
 *   dV = P^T dO                     [GQA: per query head, then summed over the group]
 *   dS = P * (dO V^T - D) * scale   (bf16 where it enters dK's matmul)
 *   dK = dS^T Q                     [GQA: likewise]
 *   dQ = dS K (an fp32 accumulator laid out as dQ, ragged with it, then cast to dQ) */
#include "cuda_attention_cudnn_graph.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef cudnnBackendDescriptor_t desc_t;

#define TRY(g, call)                                                                               \
    do {                                                                                           \
        if ((g)->status == CUDNN_STATUS_SUCCESS) {                                                 \
            cudnnStatus_t st_ = (call);                                                            \
            if (st_ != CUDNN_STATUS_SUCCESS) {                                                     \
                (g)->status = st_;                                                                 \
                snprintf((g)->failed, sizeof (g)->failed, "%.60s (line %d)", #call, __LINE__);        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static desc_t create(ft_sdpa_graph *g, cudnnBackendDescriptorType_t type)
{
    desc_t d = NULL;
    if (g->status != CUDNN_STATUS_SUCCESS)
        return NULL;
    if (g->n_descs == FT_SDPA_MAX_DESCS) {
        g->status = CUDNN_STATUS_INTERNAL_ERROR;
        snprintf(g->failed, sizeof g->failed, "more than %d descriptors", FT_SDPA_MAX_DESCS);
        return NULL;
    }
    TRY(g, cudnnBackendCreateDescriptor(type, &d));
    if (g->status == CUDNN_STATUS_SUCCESS)
        g->descs[g->n_descs++] = d;
    return d;
}

static void set(ft_sdpa_graph *g, desc_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *value)
{
    TRY(g, cudnnBackendSetAttribute(d, name, type, count, value));
}

static void finalize(ft_sdpa_graph *g, desc_t d) { TRY(g, cudnnBackendFinalize(d)); }

/* ---------------------------------------------------------------- tensors */

typedef struct tspec {
    int64_t dim[4], stride[4];
    cudnnDataType_t type;
} tspec;

enum { REAL = 0, VIRTUAL = 1, BY_VALUE = 2 };

static desc_t tensor_uid(ft_sdpa_graph *g, int64_t uid, tspec t, int kind, desc_t ragged)
{
    desc_t d = create(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16;
    bool yes = true;
    set(g, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t.type);
    set(g, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, t.dim);
    set(g, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, t.stride);
    set(g, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(g, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (kind == VIRTUAL)
        set(g, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (kind == BY_VALUE)
        set(g, d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (ragged)
        set(g, d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged);
    finalize(g, d);
    return d;
}

static desc_t virt(ft_sdpa_graph *g, tspec t)
{
    return tensor_uid(g, g->next_uid++, t, VIRTUAL, NULL);
}

static tspec dense(int64_t b, int64_t h, int64_t s, int64_t c, cudnnDataType_t type)
{
    return (tspec){ { b, h, s, c }, { h * s * c, s * c, c, 1 }, type };
}

static tspec scalar(cudnnDataType_t type) { return (tspec){ { 1, 1, 1, 1 }, { 1, 1, 1, 1 }, type }; }

/* ---------------------------------------------------------------- operations */

static void add_op(ft_sdpa_graph *g, desc_t op)
{
    if (g->status != CUDNN_STATUS_SUCCESS)
        return;
    if (g->n_ops == FT_SDPA_MAX_OPS) {
        g->status = CUDNN_STATUS_INTERNAL_ERROR;
        snprintf(g->failed, sizeof g->failed, "more than %d operations", FT_SDPA_MAX_OPS);
        return;
    }
    g->ops[g->n_ops++] = op;
}

/* y = mode(x, b) (b, t may be NULL); t is the condition of BINARY_SELECT; axis >= 0 for
 * GEN_INDEX. */
static void pointwise_to(ft_sdpa_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                         desc_t x, desc_t b, desc_t t, desc_t y, int64_t axis)
{
    desc_t pw = create(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0)
        set(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(g, pw);
    desc_t op = create(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b)
        set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t)
        set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    set(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(g, op);
    add_op(g, op);
}

static desc_t pointwise(ft_sdpa_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                        desc_t x, desc_t b, desc_t t, tspec yt, int64_t axis)
{
    desc_t y = virt(g, yt);
    pointwise_to(g, mode, prec, x, b, t, y, axis);
    return y;
}

/* c = a b over the last two dims; m/n/k overrides bound each batch element's product by
 * its document's length (NULL: the full dims). */
static void matmul_to(ft_sdpa_graph *g, desc_t a, desc_t b, desc_t c, desc_t m_ov, desc_t n_ov,
                      desc_t k_ov, bool padded)
{
    desc_t mm = create(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    double zero = 0.0;
    set(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (padded)
        set(g, mm, CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &zero);
    finalize(g, mm);
    desc_t op = create(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    set(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    if (m_ov)
        set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &m_ov);
    if (n_ov)
        set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &n_ov);
    if (k_ov)
        set(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &k_ov);
    finalize(g, op);
    add_op(g, op);
}

static void reduce_to(ft_sdpa_graph *g, cudnnReduceTensorOp_t how, desc_t x, desc_t y)
{
    desc_t rd = create(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how);
    set(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(g, rd);
    desc_t op = create(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd);
    finalize(g, op);
    add_op(g, op);
}

static void reshape_to(ft_sdpa_graph *g, desc_t x, desc_t y)
{
    desc_t op = create(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(g, op);
    add_op(g, op);
}

/* ---------------------------------------------------------------- the graphs */

/* The tensors both directions bind. */
typedef struct io {
    desc_t q, kt, v, vt, o, stats, scale, neg_inf, window, seq_q, seq_kv, rag_q, rag_kv;
    tspec q_t, kv_t, scores;
} io;

/* [b, h, s, d] over ftmpi's [tokens, h*d] rows (BSHD in memory). */
static tspec bshd(const ft_sdpa_geom *g, int64_t h, cudnnDataType_t type)
{
    return (tspec){ { g->b, h, g->s, g->d }, { g->s * h * g->d, g->d, h * g->d, 1 }, type };
}

static tspec transposed(tspec t)
{
    tspec r = t;
    r.dim[2] = t.dim[3];
    r.dim[3] = t.dim[2];
    r.stride[2] = t.stride[3];
    r.stride[3] = t.stride[2];
    return r;
}

static void bind_inputs(ft_sdpa_graph *g, const ft_sdpa_geom *geo, io *t)
{
    memset(t, 0, sizeof *t);
    t->q_t = bshd(geo, geo->hq, CUDNN_DATA_BFLOAT16);
    t->kv_t = bshd(geo, geo->hkv, CUDNN_DATA_BFLOAT16);
    t->scores = dense(geo->b, geo->hq, geo->s, geo->s, CUDNN_DATA_FLOAT);
    if (geo->ragged) {
        tspec off = { { geo->b + 1, 1, 1, 1 }, { 1, 1, 1, 1 }, CUDNN_DATA_INT32 };
        tspec len = { { geo->b, 1, 1, 1 }, { 1, 1, 1, 1 }, CUDNN_DATA_INT32 };
        t->rag_q = tensor_uid(g, FT_SDPA_RAGGED_Q, off, REAL, NULL);
        t->rag_kv = tensor_uid(g, FT_SDPA_RAGGED_KV, off, REAL, NULL);
        t->seq_q = tensor_uid(g, FT_SDPA_SEQ_Q, len, REAL, NULL);
        t->seq_kv = tensor_uid(g, FT_SDPA_SEQ_KV, len, REAL, NULL);
    }
    t->q = tensor_uid(g, FT_SDPA_Q, t->q_t, REAL, t->rag_q);
    t->kt = tensor_uid(g, FT_SDPA_K, transposed(t->kv_t), REAL, t->rag_kv);
    if (geo->backward)
        t->vt = tensor_uid(g, FT_SDPA_V, transposed(t->kv_t), REAL, t->rag_kv);
    else
        t->v = tensor_uid(g, FT_SDPA_V, t->kv_t, REAL, t->rag_kv);
    t->o = tensor_uid(g, FT_SDPA_O, t->q_t, REAL, t->rag_q);
    t->stats = tensor_uid(g, FT_SDPA_STATS, dense(geo->b, geo->hq, geo->s, 1, CUDNN_DATA_FLOAT),
                          REAL, NULL);
    t->scale = tensor_uid(g, FT_SDPA_SCALE, scalar(CUDNN_DATA_FLOAT), BY_VALUE, NULL);
    t->neg_inf = tensor_uid(g, FT_SDPA_NEG_INF, scalar(CUDNN_DATA_FLOAT), BY_VALUE, NULL);
    if (geo->window > 0)
        t->window = tensor_uid(g, FT_SDPA_WINDOW, scalar(CUDNN_DATA_FLOAT), BY_VALUE, NULL);
}

/* -inf where the condition is false. */
static desc_t mask_out(ft_sdpa_graph *g, const io *t, desc_t s, desc_t keep)
{
    return pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, t->neg_inf, keep,
                     t->scores, -1);
}

/* Each document's rows and columns beyond its length (ragged elements only). */
static desc_t padding_mask(ft_sdpa_graph *g, const io *t, desc_t s)
{
    tspec idx = t->scores, flag = t->scores;
    idx.type = CUDNN_DATA_INT32;
    flag.type = CUDNN_DATA_BOOLEAN;
    desc_t row = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, idx, 2);
    desc_t col = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, idx, 3);
    desc_t row_in = pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, row, t->seq_q, NULL,
                              flag, -1);
    desc_t col_in = pointwise(g, CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, col, t->seq_kv, NULL,
                              flag, -1);
    desc_t both = pointwise(g, CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, row_in, col_in,
                            NULL, flag, -1);
    return mask_out(g, t, s, both);
}

/* Causal (row >= col, top-left aligned: rows and columns of a document are its own
 * positions) and the sliding window (col + window > row). */
static desc_t band_mask(ft_sdpa_graph *g, const ft_sdpa_geom *geo, const io *t, desc_t s)
{
    tspec idx = t->scores, flag = t->scores;
    idx.type = CUDNN_DATA_INT32;
    flag.type = CUDNN_DATA_BOOLEAN;
    desc_t row = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, idx, 2);
    desc_t col = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, idx, 3);
    desc_t causal = pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, flag, -1);
    s = mask_out(g, t, s, causal);
    if (geo->window > 0) {
        desc_t row2 = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, idx, 2);
        desc_t col2 = pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, NULL, NULL, idx, 3);
        desc_t far = pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, col2, t->window, NULL,
                               t->scores, 3);
        desc_t in = pointwise(g, CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, far, row2, NULL, flag, -1);
        s = mask_out(g, t, s, in);
    }
    return s;
}

static desc_t scaled_scores(ft_sdpa_graph *g, const ft_sdpa_geom *geo, const io *t)
{
    desc_t s = virt(g, t->scores);
    matmul_to(g, t->q, t->kt, s, t->seq_q, t->seq_kv, NULL, geo->ragged);
    return pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s, t->scale, NULL, t->scores, -1);
}

static void forward(ft_sdpa_graph *g, const ft_sdpa_geom *geo)
{
    io t;
    bind_inputs(g, geo, &t);
    desc_t s = scaled_scores(g, geo, &t);
    if (geo->ragged)
        s = padding_mask(g, &t, s);
    s = band_mask(g, geo, &t, s);
    tspec row = dense(geo->b, geo->hq, geo->s, 1, CUDNN_DATA_FLOAT);
    desc_t m = virt(g, row);
    reduce_to(g, CUDNN_REDUCE_TENSOR_MAX, s, m);
    desc_t e = pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s, m, NULL, t.scores, -1);
    e = pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, e, NULL, NULL, t.scores, -1);
    desc_t l = virt(g, row);
    reduce_to(g, CUDNN_REDUCE_TENSOR_ADD, e, l);
    desc_t log_l = pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, l, NULL, NULL, row, -1);
    pointwise_to(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, log_l, NULL, t.stats, -1);
    tspec p_t = t.scores;
    p_t.type = CUDNN_DATA_BFLOAT16; /* the second matmul reads P in the inputs' type */
    desc_t p = pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, l, NULL, p_t, -1);
    matmul_to(g, p, t.v, t.o, t.seq_q, NULL, t.seq_kv, false);
}

/* x^T of a [b, h, r, c] virtual: the same memory read as [b, h, c, r]. */
static desc_t reshape_transposed(ft_sdpa_graph *g, desc_t x, tspec xt, cudnnDataType_t type)
{
    tspec y = transposed(xt);
    y.type = type;
    desc_t yd = virt(g, y);
    reshape_to(g, x, yd);
    return yd;
}

/* dX = a b, summed over each group of hq/hkv query heads when X has hkv heads. */
static void grad_kv(ft_sdpa_graph *g, const ft_sdpa_geom *geo, desc_t a, desc_t b, desc_t dx,
                    desc_t m_ov, desc_t k_ov)
{
    if (geo->hq == geo->hkv) {
        matmul_to(g, a, b, dx, m_ov, NULL, k_ov, false);
        return;
    }
    /* per query head in the inputs' type, as cudnn-frontend's graph has it */
    desc_t full = virt(g, dense(geo->b, geo->hq, geo->s, geo->d, CUDNN_DATA_BFLOAT16));
    matmul_to(g, a, b, full, m_ov, NULL, k_ov, false);
    reduce_to(g, CUDNN_REDUCE_TENSOR_ADD, full, dx);
}

static void backward(ft_sdpa_graph *g, const ft_sdpa_geom *geo)
{
    io t;
    bind_inputs(g, geo, &t);
    desc_t d_o = tensor_uid(g, FT_SDPA_DO, t.q_t, REAL, t.rag_q);
    desc_t dq = tensor_uid(g, FT_SDPA_DQ, t.q_t, REAL, t.rag_q);
    desc_t dk = tensor_uid(g, FT_SDPA_DK, t.kv_t, REAL, t.rag_kv);
    desc_t dv = tensor_uid(g, FT_SDPA_DV, t.kv_t, REAL, t.rag_kv);
    desc_t one = tensor_uid(g, FT_SDPA_ONE, scalar(CUDNN_DATA_FLOAT), BY_VALUE, NULL);
    tspec row = dense(geo->b, geo->hq, geo->s, 1, CUDNN_DATA_FLOAT);
    tspec qd = dense(geo->b, geo->hq, geo->s, geo->d, CUDNN_DATA_FLOAT);

    /* D = rowsum(dO * O), kept in the workspace for the whole pass */
    desc_t dodo = pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, d_o, t.o, NULL, qd, -1);
    desc_t dsum = virt(g, row);
    reduce_to(g, CUDNN_REDUCE_TENSOR_ADD, dodo, dsum);
    desc_t softmax_sum = tensor_uid(g, FT_SDPA_SOFTMAX_SUM, row, REAL, NULL);
    pointwise_to(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dsum, one, NULL, softmax_sum, -1);

    /* P from the saved statistics */
    desc_t s = scaled_scores(g, geo, &t);
    if (geo->ragged)
        s = padding_mask(g, &t, s);
    s = pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s, t.stats, NULL, t.scores, -1);
    s = band_mask(g, geo, &t, s);
    desc_t p = pointwise(g, CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, s, NULL, NULL, t.scores, -1);

    /* dV = P^T dO */
    desc_t pt = reshape_transposed(g, p, t.scores, CUDNN_DATA_BFLOAT16);
    grad_kv(g, geo, pt, d_o, dv, t.seq_kv, t.seq_q);

    /* dS = P * (dO V^T - D) * scale */
    desc_t dp = virt(g, t.scores);
    matmul_to(g, d_o, t.vt, dp, t.seq_q, t.seq_kv, NULL, false);
    dp = pointwise(g, CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, softmax_sum, NULL, t.scores, -1);
    dp = pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp, p, NULL, t.scores, -1);
    desc_t ds = pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dp, t.scale, NULL, t.scores, -1);

    /* dK = dS^T Q */
    desc_t dst = reshape_transposed(g, ds, t.scores, CUDNN_DATA_BFLOAT16);
    grad_kv(g, geo, dst, t.q, dk, t.seq_kv, t.seq_q);

    /* dQ = dS K, through the fp32 accumulator */
    desc_t k = tensor_uid(g, g->next_uid++, t.kv_t, VIRTUAL, t.rag_kv);
    reshape_to(g, t.kt, k);
    tspec acc_t = t.q_t; /* dQ's layout in fp32: with documents, as ragged as dQ */
    acc_t.type = CUDNN_DATA_FLOAT;
    desc_t acc = tensor_uid(g, FT_SDPA_DQ_ACCUM, acc_t, REAL, t.rag_q);
    matmul_to(g, ds, k, acc, t.seq_q, NULL, t.seq_kv, false);
    pointwise_to(g, CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, acc, NULL, NULL, dq, -1);
}

/* ---------------------------------------------------------------- graph and plan */

/* 1 when the engine of configuration cfg carries CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
 * (its results may differ from run to run); g->status set on failure. */
static int engine_nondeterministic(ft_sdpa_graph *g, desc_t cfg)
{
    desc_t engine = create(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    TRY(g, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine));
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    TRY(g, cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                    CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                    &n, notes));
    if (g->status != CUDNN_STATUS_SUCCESS)
        return 0;
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
            return 1;
    return 0;
}

static void build_plan(ft_sdpa_graph *g, cudnnHandle_t h, int nondeterministic_ok)
{
    g->opgraph = create(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g, g->opgraph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    set(g, g->opgraph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops);
    finalize(g, g->opgraph);

    desc_t heur = create(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    set(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->opgraph);
    set(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    finalize(g, heur);
    /* how many configurations there are: asked with no output array, since cuDNN answers
     * a request for 0 elements into an array with 0 (seen on 9.14 and 9.19) */
    int64_t count = 0;
    TRY(g, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if (g->status != CUDNN_STATUS_SUCCESS)
        return;
    enum { MAX_CONFIGS = 8 };
    desc_t cfg[MAX_CONFIGS];
    int64_t want = count < MAX_CONFIGS ? count : MAX_CONFIGS, got = 0;
    for (int64_t i = 0; i < want; i++)
        cfg[i] = create(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (want > 0)
        TRY(g, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, want, &got, cfg));
    if (g->status != CUDNN_STATUS_SUCCESS)
        return;
    /* the heuristics' order is their ranking: the first configuration that finalizes,
     * of the deterministic ones unless any may do */
    int64_t skipped = 0;
    for (int64_t i = 0; i < got && !g->plan; i++) {
        if (!nondeterministic_ok && engine_nondeterministic(g, cfg[i])) {
            skipped++;
            continue;
        }
        if (g->status != CUDNN_STATUS_SUCCESS)
            return;
        desc_t plan = create(g, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(g, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        set(g, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &cfg[i]);
        if (g->status != CUDNN_STATUS_SUCCESS)
            return;
        if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS)
            g->plan = plan;
    }
    if (!g->plan) {
        g->status = CUDNN_STATUS_NOT_SUPPORTED;
        if (skipped)
            snprintf(g->failed, sizeof g->failed,
                     "no engine of %lld finalizes a plan (%lld non-deterministic ones skipped: "
                     "FTMPI_ATTENTION_NONDETERMINISTIC=1 allows them)",
                     (long long)got, (long long)skipped);
        else
            snprintf(g->failed, sizeof g->failed, "no engine of %lld finalizes a plan",
                     (long long)got);
        return;
    }
    TRY(g, cudnnBackendGetAttribute(g->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                    CUDNN_TYPE_INT64, 1, &count, &g->workspace));
}

cudnnStatus_t ft_sdpa_graph_build(ft_sdpa_graph *g, cudnnHandle_t h, const ft_sdpa_geom *geo)
{
    memset(g, 0, sizeof *g);
    g->next_uid = FT_SDPA_FIRST_VIRTUAL;
    if (geo->backward)
        backward(g, geo);
    else
        forward(g, geo);
    build_plan(g, h, geo->nondeterministic_ok);
    return g->status;
}

void ft_sdpa_graph_release(ft_sdpa_graph *g)
{
    for (int i = g->n_descs - 1; i >= 0; i--)
        (void)cudnnBackendDestroyDescriptor(g->descs[i]);
    g->n_descs = 0;
    g->n_ops = 0;
    g->plan = g->opgraph = NULL;
}
