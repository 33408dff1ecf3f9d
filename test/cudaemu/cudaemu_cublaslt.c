/* The CPU execution harness for CUDA: cuBLASLt's handle, descriptors, preferences and
 * heuristic, with the signatures of <cublasLt.h>. The matmul is in
 * cudaemu_cublaslt_matmul.c.
 *
 * Emulated: column-major matrices of CUDA_R_32F or CUDA_R_16BF, compute type
 * CUBLAS_COMPUTE_32F with a CUDA_R_32F scale type and host scalars, TRANSA/TRANSB,
 * epilogues DEFAULT and BIAS, and strided batches (BATCH_COUNT equal on the four
 * layouts, STRIDED_BATCH_OFFSET >= 0 elements: 0 shares one matrix among the batches;
 * the bias is shared too, cuBLASLt's default bias batch stride 0). Anything else
 * answers CUBLAS_STATUS_NOT_SUPPORTED (from the heuristic, which then returns no
 * algorithm, as cuBLASLt does). The heuristic always
 * offers one algorithm and records in it the alignments and workspace the caller
 * promised, so that cublasLtMatmul can hold the caller to them. */
#include "cudaemu_cublaslt.h"

#include <stdlib.h>
#include <string.h>

#include "cudaemu_host.h"

lt_desc *lt_desc_of(cublasLtMatmulDesc_t h)
{
    lt_desc *d = (lt_desc *)(void *)h;
    return d && d->magic == LT_DESC_MAGIC ? d : NULL;
}

lt_layout *lt_layout_of(cublasLtMatrixLayout_t h)
{
    lt_layout *l = (lt_layout *)(void *)h;
    return l && l->magic == LT_LAYOUT_MAGIC ? l : NULL;
}

static lt_pref *lt_pref_of(cublasLtMatmulPreference_t h)
{
    lt_pref *p = (lt_pref *)(void *)h;
    return p && p->magic == LT_PREF_MAGIC ? p : NULL;
}

int lt_handle_ok(cublasLtHandle_t h) { return h && h->magic == LT_HANDLE_MAGIC; }

size_t lt_type_size(int32_t type)
{
    return type == CUDA_R_32F ? 4 : type == CUDA_R_16BF ? 2 : 0;
}

/* ---------------------------------------------------------------- handle */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasLtContext *h = malloc(sizeof *h);
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = LT_HANDLE_MAGIC;
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lt_handle_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- attributes */

/* Copies an attribute value in (set) or out (get) after checking its size. */
static cublasStatus_t attr_io(void *field, size_t field_size, const void *in, void *out,
                              size_t size, size_t *written)
{
    if (written)
        *written = field_size;
    if (in) {
        if (size != field_size)
            return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(field, in, field_size);
    } else if (out) {
        if (size < field_size)
            return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(out, field, field_size);
    } else if (size != 0) {
        return CUBLAS_STATUS_INVALID_VALUE; /* size query: buf NULL, size 0 */
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- matmul descriptor */

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_desc *d = calloc(1, sizeof *d);
    if (!d)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *d = (lt_desc){ .magic = LT_DESC_MAGIC, .compute_type = computeType, .scale_type = scaleType,
                    .pointer_mode = CUBLASLT_POINTER_MODE_HOST, .trans_a = CUBLAS_OP_N,
                    .trans_b = CUBLAS_OP_N, .epilogue = CUBLASLT_EPILOGUE_DEFAULT,
                    .bias = NULL, .bias_type = -1 };
    *matmulDesc = (cublasLtMatmulDesc_t)(void *)d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    lt_desc *d = lt_desc_of(matmulDesc);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    d->magic = 0;
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t desc_attr(cublasLtMatmulDesc_t h, cublasLtMatmulDescAttributes_t attr,
                                const void *in, void *out, size_t size, size_t *written)
{
    lt_desc *d = lt_desc_of(h);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
        return attr_io(&d->compute_type, sizeof d->compute_type, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        return attr_io(&d->scale_type, sizeof d->scale_type, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        return attr_io(&d->pointer_mode, sizeof d->pointer_mode, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSA:
        return attr_io(&d->trans_a, sizeof d->trans_a, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSB:
        return attr_io(&d->trans_b, sizeof d->trans_b, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        return attr_io(&d->epilogue, sizeof d->epilogue, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        return attr_io((void *)&d->bias, sizeof d->bias, in, out, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        return attr_io(&d->bias_type, sizeof d->bias_type, in, out, size, written);
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    if (!buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc_attr(matmulDesc, attr, buf, NULL, sizeInBytes, NULL);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t sizeInBytes, size_t *sizeWritten)
{
    return desc_attr(matmulDesc, attr, NULL, buf, sizeInBytes, sizeWritten);
}

/* ---------------------------------------------------------------- matrix layout */

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_layout *l = calloc(1, sizeof *l);
    if (!l)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *l = (lt_layout){ .magic = LT_LAYOUT_MAGIC, .type = type, .order = CUBLASLT_ORDER_COL,
                      .rows = rows, .cols = cols, .ld = ld, .batch_count = 1 };
    *matLayout = (cublasLtMatrixLayout_t)(void *)l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    lt_layout *l = lt_layout_of(matLayout);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    l->magic = 0;
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t layout_attr(cublasLtMatrixLayout_t h, cublasLtMatrixLayoutAttribute_t attr,
                                  const void *in, void *out, size_t size, size_t *written)
{
    lt_layout *l = lt_layout_of(h);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return attr_io(&l->type, 4, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return attr_io(&l->order, 4, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return attr_io(&l->rows, 8, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return attr_io(&l->cols, 8, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_LD: return attr_io(&l->ld, 8, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        return attr_io(&l->batch_count, 4, in, out, size, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        return attr_io(&l->batch_stride, 8, in, out, size, written);
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    if (!buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    return layout_attr(matLayout, attr, buf, NULL, sizeInBytes, NULL);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void *buf,
                                                size_t sizeInBytes, size_t *sizeWritten)
{
    return layout_attr(matLayout, attr, NULL, buf, sizeInBytes, sizeWritten);
}

/* ---------------------------------------------------------------- preference */

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    lt_pref *p = calloc(1, sizeof *p);
    if (!p)
        return CUBLAS_STATUS_ALLOC_FAILED;
    /* cuBLASLt's defaults: no workspace, and every operand 256-byte aligned. */
    *p = (lt_pref){ .magic = LT_PREF_MAGIC, .max_workspace = 0, .align = { 256, 256, 256, 256 } };
    *pref = (cublasLtMatmulPreference_t)(void *)p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    lt_pref *p = lt_pref_of(pref);
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    p->magic = 0;
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t pref_attr(cublasLtMatmulPreference_t h,
                                cublasLtMatmulPreferenceAttributes_t attr, const void *in,
                                void *out, size_t size, size_t *written)
{
    lt_pref *p = lt_pref_of(h);
    uint32_t ignored = 0;
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        return attr_io(&p->max_workspace, 8, in, out, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
        return attr_io(&p->align[0], 4, in, out, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
        return attr_io(&p->align[1], 4, in, out, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
        return attr_io(&p->align[2], 4, in, out, size, written);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return attr_io(&p->align[3], 4, in, out, size, written);
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: /* one algorithm whatever the mode */
        return attr_io(&ignored, 4, in, out, size, written);
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    if (!buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    return pref_attr(pref, attr, buf, NULL, sizeInBytes, NULL);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    void *buf, size_t sizeInBytes,
                                                    size_t *sizeWritten)
{
    return pref_attr(pref, attr, NULL, buf, sizeInBytes, sizeWritten);
}

/* ---------------------------------------------------------------- heuristic */

static int is_op(int32_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T; }

/* The strided batch of the four layouts: cuBLASLt multiplies batch i of each operand, so
 * the counts must agree (a count of 1 is not broadcast). A negative stride is legal in
 * cuBLASLt but never used by the backend, and the extent checks assume the batches run
 * upwards from the pointer: refused rather than emulated half-way. */
static cublasStatus_t lt_batch(const lt_layout *const all[4], int32_t *batch)
{
    for (int i = 0; i < 4; i++)
        if (all[i]->batch_count < 1 || all[i]->batch_count != all[0]->batch_count)
            return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < 4; i++)
        if (all[i]->batch_count > 1 && all[i]->batch_stride < 0)
            return CUBLAS_STATUS_NOT_SUPPORTED;
    if (batch)
        *batch = all[0]->batch_count;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t lt_shape(const lt_desc *d, const lt_layout *a, const lt_layout *b,
                        const lt_layout *c, const lt_layout *dl, uint64_t *m, uint64_t *n,
                        uint64_t *k, int32_t *batch)
{
    if (!d || !a || !b || !c || !dl)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->compute_type != CUBLAS_COMPUTE_32F || d->scale_type != CUDA_R_32F ||
        d->pointer_mode != CUBLASLT_POINTER_MODE_HOST || !is_op(d->trans_a) ||
        !is_op(d->trans_b) ||
        (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const lt_layout *all[4] = { a, b, c, dl };
    for (int i = 0; i < 4; i++)
        if (!lt_type_size(all[i]->type) || all[i]->order != CUBLASLT_ORDER_COL)
            return CUBLAS_STATUS_NOT_SUPPORTED;
    if (a->type != b->type || c->type != dl->type)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (a->type == CUDA_R_32F && dl->type != CUDA_R_32F) /* fp32 in, bf16 out: not offered */
        return CUBLAS_STATUS_NOT_SUPPORTED;
    int32_t bias_type = d->bias_type == -1 ? dl->type : d->bias_type;
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && !lt_type_size(bias_type))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    /* op(A) is [m,k], op(B) [k,n], C and D [m,n]. */
    *m = d->trans_a == CUBLAS_OP_N ? a->rows : a->cols;
    *k = d->trans_a == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t kb = d->trans_b == CUBLAS_OP_N ? b->rows : b->cols;
    *n = d->trans_b == CUBLAS_OP_N ? b->cols : b->rows;
    if (kb != *k || dl->rows != *m || dl->cols != *n || c->rows != *m || c->cols != *n)
        return CUBLAS_STATUS_INVALID_VALUE;
    return lt_batch(all, batch);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount)
{
    if (!lt_handle_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    lt_pref *p = lt_pref_of(preference);
    if (!p || requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    uint64_t m, n, k;
    int32_t batch;
    cublasStatus_t s = lt_shape(lt_desc_of(operationDesc), lt_layout_of(Adesc),
                                lt_layout_of(Bdesc), lt_layout_of(Cdesc), lt_layout_of(Ddesc),
                                &m, &n, &k, &batch); /* batched or not: the same algorithm */
    if (s != CUBLAS_STATUS_SUCCESS)
        return s;
    /* CUDAEMU_LT_NO_BATCH=1: a library that takes no strided batch (the caller's fallback) */
    const char *no_batch = getenv("CUDAEMU_LT_NO_BATCH");
    if (batch > 1 && no_batch && strcmp(no_batch, "1") == 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    for (int i = 0; i < 4; i++)
        if (p->align[i] == 0 || (p->align[i] & (p->align[i] - 1)) != 0)
            return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    memset(r, 0, sizeof *r);
    r->algo.data[ALGO_MAGIC] = LT_ALGO_MAGIC;
    r->algo.data[ALGO_ALIGN_A] = p->align[0];
    r->algo.data[ALGO_ALIGN_B] = p->align[1];
    r->algo.data[ALGO_ALIGN_C] = p->align[2];
    r->algo.data[ALGO_ALIGN_D] = p->align[3];
    r->algo.data[ALGO_WORKSPACE] = p->max_workspace;
    r->workspaceSize = 0; /* the emulation needs none, but checks what it is given */
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- status */

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}
