/* The CPU execution harness for CUDA: cublasLtMatmul on CBLAS.
 *
 *     D_i = alpha * op(A_i) op(B_i) + beta * C_i   (+ bias[r] on every column, epilogue BIAS)
 *
 * for each batch i < b of a strided batch (b = 1 unless the layouts' BATCH_COUNT says
 * otherwise): X_i starts STRIDED_BATCH_OFFSET elements of X's type after X_(i-1), a
 * stride of 0 sharing one matrix among the batches (the bias is always shared). Each
 * batch is computed exactly as an unbatched call on its pointers would be, so a batched
 * call is bitwise b separate calls: column-major, op(A) [m,k], op(B) [k,n], C and D
 * [m,n], in fp32: bf16 inputs are widened to fp32 (exactly), cblas_sgemm forms
 * alpha * op(A) op(B) in an fp32 buffer, then beta * C and the bias are added in fp32 and
 * the sum is rounded to D's type (round to nearest, ties to even, for bf16). beta == 0
 * never reads C, as in cuBLASLt: C may hold anything, the NaN poison of fresh memory
 * included.
 *
 * Checks at the call (findings, which abort): each of an operand's matrices (X_i, one
 * when the stride is 0) is a live device range of the span its layout implies, (cols -
 * 1) * ld + rows elements (so a wrong leading dimension or stride, a host pointer or a
 * short buffer is reported; the batches may lie in separate allocations); ld >= rows;
 * D's batches do not overlap (stride >= span when b > 1: on a GPU they are written
 * concurrently); C and D, when they are one pointer read
 * and written in place, have one ld and stride; each batch's pointer has the alignment
 * promised to the heuristic that chose the algorithm; the workspace given is live. The
 * matmul is then queued on the stream with its accesses, one per matrix: A, B and
 * the bias read, C read when beta != 0, D and the workspace written. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu_cublaslt.h"
#include "cudaemu_host.h"
#include "util/bf16.h"

typedef struct mm_work {
    int trans_a, trans_b;
    int m, n, k;
    int32_t in_type, out_type, bias_type;
    const void *a, *b, *c, *bias;
    void *d;
    int64_t lda, ldb, ldc, ldd;
    uint64_t a_rows, a_cols, b_rows, b_cols;
    float alpha, beta;
    int32_t batch;                               /* >= 1 */
    int64_t stride_a, stride_b, stride_c, stride_d; /* elements, >= 0 */
} mm_work;

static const char *type_name(int32_t t) { return t == CUDA_R_16BF ? "CUDA_R_16BF" : "CUDA_R_32F"; }

/* Elements a column-major [rows, cols] matrix with leading dimension ld spans. */
static uint64_t span(uint64_t rows, uint64_t cols, int64_t ld)
{
    return rows == 0 || cols == 0 ? 0 : (cols - 1) * (uint64_t)ld + rows;
}

static float load(const void *p, int32_t type, size_t i)
{
    return type == CUDA_R_16BF ? ft_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void store(void *p, int32_t type, size_t i, float v)
{
    if (type == CUDA_R_16BF)
        ((uint16_t *)p)[i] = ft_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* An fp32 view of a matrix with the same layout: the matrix itself if it is fp32, else a
 * widened copy (owned by the caller, returned in *owned). */
static const float *as_f32(const void *p, int32_t type, uint64_t rows, uint64_t cols, int64_t ld,
                           float **owned)
{
    *owned = NULL;
    if (type == CUDA_R_32F)
        return p;
    size_t n = (size_t)span(rows, cols, ld);
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f)
        cudaemu_fail("cublasLtMatmul: out of host memory widening a bf16 operand");
    for (uint64_t j = 0; j < cols; j++) /* only the matrix's elements: the gaps stay unread */
        for (uint64_t i = 0; i < rows; i++)
            f[j * (uint64_t)ld + i] = load(p, type, j * (uint64_t)ld + i);
    *owned = f;
    return f;
}

/* Batch i of an operand: `stride` elements of `type` per batch on from p (NULL stays
 * NULL: A and B when k == 0, C when beta == 0 need not be pointers at all). */
static const void *batch_ptr(const void *p, int32_t type, int64_t stride, int32_t i)
{
    return p ? (const char *)p + (size_t)i * (size_t)stride * lt_type_size(type) : NULL;
}

/* One unbatched matmul on the given pointers, with w's shape, types and scalars. */
static void run_one(const mm_work *w, const void *a_in, const void *b_in, const void *c,
                    void *d)
{
    float *a_owned, *b_owned;
    const float *a = NULL, *b = NULL;
    a_owned = b_owned = NULL;
    if (w->k > 0) {
        a = as_f32(a_in, w->in_type, w->a_rows, w->a_cols, w->lda, &a_owned);
        b = as_f32(b_in, w->in_type, w->b_rows, w->b_cols, w->ldb, &b_owned);
    }
    float *prod = malloc((size_t)w->m * (size_t)w->n * sizeof *prod);
    if (!prod)
        cudaemu_fail("cublasLtMatmul: out of host memory for a %d x %d product", w->m, w->n);
    if (w->k > 0)
        cblas_sgemm(CblasColMajor, w->trans_a ? CblasTrans : CblasNoTrans,
                    w->trans_b ? CblasTrans : CblasNoTrans, w->m, w->n, w->k, w->alpha, a,
                    (int)w->lda, b, (int)w->ldb, 0.0f, prod, w->m);
    else /* an empty sum; A and B are not read (their layouts may be degenerate) */
        memset(prod, 0, (size_t)w->m * (size_t)w->n * sizeof *prod);
    for (int j = 0; j < w->n; j++)
        for (int i = 0; i < w->m; i++) {
            float v = prod[(size_t)j * (size_t)w->m + (size_t)i];
            if (w->beta != 0.0f)
                v += w->beta * load(c, w->out_type, (size_t)j * (size_t)w->ldc + (size_t)i);
            if (w->bias)
                v += load(w->bias, w->bias_type, (size_t)i);
            store(d, w->out_type, (size_t)j * (size_t)w->ldd + (size_t)i, v);
        }
    free(prod);
    free(a_owned);
    free(b_owned);
}

/* The batches one after the other: each exactly an unbatched call (a shared operand is
 * widened again for every batch rather than cached, to keep that so). */
static void run_matmul(void *ctx)
{
    const mm_work *w = ctx;
    for (int32_t i = 0; i < w->batch; i++)
        run_one(w, batch_ptr(w->a, w->in_type, w->stride_a, i),
                batch_ptr(w->b, w->in_type, w->stride_b, i),
                w->beta != 0.0f ? batch_ptr(w->c, w->out_type, w->stride_c, i) : NULL,
                (void *)batch_ptr(w->d, w->out_type, w->stride_d, i));
}

/* The layout of `name` in findings: "A ([8 x 6], ld 8" and, for a batch, the count and
 * stride. */
static void describe_layout(char *out, size_t size, const char *name, const lt_layout *l,
                            int32_t batch)
{
    int n = snprintf(out, size, "%s ([%llu x %llu], ld %lld", name, (unsigned long long)l->rows,
                     (unsigned long long)l->cols, (long long)l->ld);
    if (batch > 1 && n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, ", batch count %d, stride %lld elements", (int)batch,
                 (long long)l->batch_stride);
}

/* A finding if the bytes from the operand's pointer to the end of its last batch, span +
 * (batch - 1) * stride elements, do not fit in a size_t: an absurd stride must not wrap
 * around into a batch address that passes the range check. */
static void check_extent_fits(const char *layout, const lt_layout *l, int32_t batch)
{
    uint64_t elems = span(l->rows, l->cols, l->ld), size = lt_type_size(l->type);
    uint64_t steps = batch > 1 ? (uint64_t)(batch - 1) : 0, stride = (uint64_t)l->batch_stride;
    uint64_t max = (uint64_t)SIZE_MAX / size; /* elements whose bytes fit a size_t */
    if (elems > max || (steps > 0 && stride > 0 && steps > (max - elems) / stride))
        cudaemu_fail("cublasLtMatmul: %s): the extent of the operand over all batches "
                     "overflows a size_t", layout);
}

/* Each of the operand's matrices (one when the stride is 0 or the count 1) must be a live
 * device range of its layout's span, with ld >= rows. Batches need not share one
 * allocation: a pair of separately allocated buffers at a fixed distance is a valid
 * strided batch (the kernel touches only the matrices), so the gap between them is not
 * checked. Appends one access record per matrix to acc (write: D's). */
static void check_operand(const char *name, const void *p, const lt_layout *l, int32_t batch,
                          int write, cudaemu_access *acc, int *n_acc)
{
    if (l->ld < 0 || (uint64_t)l->ld < l->rows || l->ld == 0)
        cudaemu_fail("cublasLtMatmul: the layout of %s has ld = %lld < rows = %llu (a "
                     "column-major [%llu x %llu] matrix needs ld >= rows)",
                     name, (long long)l->ld, (unsigned long long)l->rows,
                     (unsigned long long)l->rows, (unsigned long long)l->cols);
    char layout[160], what[256];
    describe_layout(layout, sizeof layout, name, l, batch);
    check_extent_fits(layout, l, batch);
    const size_t es = lt_type_size(l->type);
    const size_t bytes = (size_t)span(l->rows, l->cols, l->ld) * es;
    const int32_t matrices = batch > 1 && l->batch_stride > 0 ? batch : 1;
    for (int32_t i = 0; i < matrices; i++) {
        const char *at = (const char *)p + (size_t)i * (size_t)l->batch_stride * es;
        if (matrices > 1)
            snprintf(what, sizeof what, "%s, %s: batch %d, %zu bytes)", layout,
                     type_name(l->type), (int)i, bytes);
        else
            snprintf(what, sizeof what, "%s, %s: %zu bytes)", layout, type_name(l->type), bytes);
        if (!at)
            cudaemu_fail("cublasLtMatmul: %s is NULL", what);
        cudaemu_check_device_range(at, bytes, "cublasLtMatmul", what);
        acc[(*n_acc)++] = (cudaemu_access){ at, bytes, write };
    }
}

/* On a GPU the batches of D are written concurrently: two batches sharing an element race.
 * A stride of at least the span keeps them apart. (Columns of two batches interleaved
 * in one ld would not overlap either, but nothing calls for that layout, and this rule
 * is the one a reader can check at a glance.) */
static void check_d_disjoint(const lt_layout *l, int32_t batch)
{
    uint64_t elems = span(l->rows, l->cols, l->ld);
    if (batch > 1 && (uint64_t)l->batch_stride < elems) {
        char layout[160];
        describe_layout(layout, sizeof layout, "D", l, batch);
        cudaemu_fail("cublasLtMatmul: %s): the batches of D overlap: each spans %llu "
                     "elements but they start %lld elements apart, so two batches write the "
                     "same elements (a race on a GPU)",
                     layout, (unsigned long long)elems, (long long)l->batch_stride);
    }
}

/* C read and D written in place (C == D): cuBLASLt requires one layout for both, else
 * writing one element of D overwrites an element of C that is still to be read. */
static void check_in_place(const void *C, const lt_layout *lc, const lt_layout *ld,
                           int32_t batch)
{
    if (lc->ld == ld->ld && (batch == 1 || lc->batch_stride == ld->batch_stride))
        return;
    char c_layout[160], d_layout[160];
    describe_layout(c_layout, sizeof c_layout, "C", lc, batch);
    describe_layout(d_layout, sizeof d_layout, "D", ld, batch);
    cudaemu_fail("cublasLtMatmul: C and D are the same pointer %p (in place, beta != 0) but "
                 "their layouts differ: %s) and %s); in place they must have the same ld and "
                 "stride",
                 C, c_layout, d_layout);
}

/* Each batch's pointer, p + i * stride elements, must have the promised alignment. */
static void check_alignment(const char *name, const void *p, const lt_layout *l, int32_t batch,
                            uint64_t promised)
{
    if (promised <= 1)
        return;
    /* Batch i starts at p + i * step. With batches 0 and 1 aligned, step is a multiple of
     * the (power of two) promise and so every batch is aligned: two checks suffice. */
    uintptr_t step = (uintptr_t)l->batch_stride * lt_type_size(l->type);
    for (int32_t i = 0; i < (batch > 1 ? 2 : 1); i++) {
        uintptr_t at = (uintptr_t)p + (uintptr_t)i * step;
        if (at % promised == 0)
            continue;
        char which[96] = "";
        if (batch > 1)
            snprintf(which, sizeof which, " of batch %d (batch count %d, stride %lld elements)",
                     (int)i, (int)batch, (long long)l->batch_stride);
        cudaemu_fail("cublasLtMatmul: %s%s = %p is not %llu-byte aligned, but the algorithm "
                     "was chosen by cublasLtMatmulAlgoGetHeuristic for operands with "
                     "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%s_BYTES = %llu",
                     name, which, (void *)at, (unsigned long long)promised, name,
                     (unsigned long long)promised);
    }
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    if (!lt_handle_ok(lightHandle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    const lt_desc *d = lt_desc_of(computeDesc);
    const lt_layout *la = lt_layout_of(Adesc), *lb = lt_layout_of(Bdesc),
                    *lc = lt_layout_of(Cdesc), *ld = lt_layout_of(Ddesc);
    uint64_t m, n, k;
    int32_t batch;
    cublasStatus_t s = lt_shape(d, la, lb, lc, ld, &m, &n, &k, &batch);
    if (s != CUBLAS_STATUS_SUCCESS)
        return s;
    if (!alpha || !beta || (algo && algo->data[ALGO_MAGIC] != LT_ALGO_MAGIC))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* CBLAS takes int dimensions */
    mm_work w = { .trans_a = d->trans_a == CUBLAS_OP_T, .trans_b = d->trans_b == CUBLAS_OP_T,
                  .m = (int)m, .n = (int)n, .k = (int)k, .in_type = la->type,
                  .out_type = ld->type, .a = A, .b = B, .c = C, .d = D,
                  .lda = la->ld, .ldb = lb->ld, .ldc = lc->ld, .ldd = ld->ld,
                  .a_rows = la->rows, .a_cols = la->cols, .b_rows = lb->rows,
                  .b_cols = lb->cols, .batch = batch, .stride_a = la->batch_stride,
                  .stride_b = lb->batch_stride, .stride_c = lc->batch_stride,
                  .stride_d = ld->batch_stride };
    memcpy(&w.alpha, alpha, sizeof w.alpha); /* host scalars are read at the call */
    memcpy(&w.beta, beta, sizeof w.beta);

    /* one record per matrix of A, B, C and D, the bias and the workspace */
    cudaemu_access *acc = malloc((4 * (size_t)batch + 2) * sizeof *acc);
    if (!acc)
        return CUBLAS_STATUS_ALLOC_FAILED;
    int n_acc = 0;
    if (m > 0 && n > 0) {
        if (k > 0) {
            check_operand("A", A, la, batch, 0, acc, &n_acc);
            check_operand("B", B, lb, batch, 0, acc, &n_acc);
        }
        if (w.beta != 0.0f) {
            check_operand("C", C, lc, batch, 0, acc, &n_acc);
            if (C == D)
                check_in_place(C, lc, ld, batch);
        }
        check_operand("D", D, ld, batch, 1, acc, &n_acc);
        check_d_disjoint(ld, batch);
        if (d->epilogue == CUBLASLT_EPILOGUE_BIAS) {
            w.bias_type = d->bias_type == -1 ? ld->type : d->bias_type;
            size_t bytes = (size_t)m * lt_type_size(w.bias_type);
            if (!d->bias)
                cudaemu_fail("cublasLtMatmul: epilogue BIAS without CUBLASLT_MATMUL_DESC_BIAS_POINTER");
            cudaemu_check_device_range(d->bias, bytes, "cublasLtMatmul", "bias");
            w.bias = d->bias;
            acc[n_acc++] = (cudaemu_access){ d->bias, bytes, 0 };
        }
    }
    if (algo) {
        check_alignment("A", A, la, batch, algo->data[ALGO_ALIGN_A]);
        check_alignment("B", B, lb, batch, algo->data[ALGO_ALIGN_B]);
        if (w.beta != 0.0f)
            check_alignment("C", C, lc, batch, algo->data[ALGO_ALIGN_C]);
        check_alignment("D", D, ld, batch, algo->data[ALGO_ALIGN_D]);
    }
    if (workspaceSizeInBytes > 0) {
        if (!workspace)
            cudaemu_fail("cublasLtMatmul: workspace is NULL with workspaceSizeInBytes = %zu",
                         workspaceSizeInBytes);
        cudaemu_check_device_range(workspace, workspaceSizeInBytes, "cublasLtMatmul",
                                   "workspace");
        acc[n_acc++] = (cudaemu_access){ workspace, workspaceSizeInBytes, 1 };
    }
    mm_work *ctx = NULL;
    if (m > 0 && n > 0) { /* else nothing to compute; the workspace check still held */
        ctx = malloc(sizeof *ctx);
        if (ctx) {
            *ctx = w;
            cudaemu_enqueue(stream, "cublasLtMatmul", run_matmul, ctx, free, acc, n_acc);
        }
    }
    free(acc); /* cudaemu_enqueue copied it */
    return m > 0 && n > 0 && !ctx ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}
