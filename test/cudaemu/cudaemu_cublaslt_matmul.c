/* The CPU execution harness for CUDA: cublasLtMatmul on CBLAS.
 *
 *     D = alpha * op(A) op(B) + beta * C   (+ bias[i] on every column, epilogue BIAS)
 *
 * column-major, op(A) [m,k], op(B) [k,n], C and D [m,n], computed in fp32: bf16 inputs
 * are widened to fp32 (exactly), cblas_sgemm forms alpha * op(A) op(B) in an fp32
 * buffer, then beta * C and the bias are added in fp32 and the sum is rounded to D's
 * type (round to nearest, ties to even, for bf16). beta == 0 never reads C, as in
 * cuBLASLt: C may hold anything, the NaN poison of fresh memory included.
 *
 * Checks at the call (findings, which abort): every operand is a live device range of
 * the extent its layout implies, ((cols - 1) * ld + rows) elements (so a wrong leading
 * dimension, a host pointer or a short buffer is reported); ld >= rows; each pointer has
 * the alignment promised to the heuristic that chose the algorithm; the workspace given
 * is live. The matmul is then queued on the stream with its accesses: A, B and the bias
 * read, C read when beta != 0, D and the workspace written. */
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

static void run_matmul(void *ctx)
{
    const mm_work *w = ctx;
    float *a_owned, *b_owned;
    const float *a = NULL, *b = NULL;
    a_owned = b_owned = NULL;
    if (w->k > 0) {
        a = as_f32(w->a, w->in_type, w->a_rows, w->a_cols, w->lda, &a_owned);
        b = as_f32(w->b, w->in_type, w->b_rows, w->b_cols, w->ldb, &b_owned);
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
                v += w->beta * load(w->c, w->out_type, (size_t)j * (size_t)w->ldc + (size_t)i);
            if (w->bias)
                v += load(w->bias, w->bias_type, (size_t)i);
            store(w->d, w->out_type, (size_t)j * (size_t)w->ldd + (size_t)i, v);
        }
    free(prod);
    free(a_owned);
    free(b_owned);
}

/* The operand must be a live device range of its layout's extent, with ld >= rows. */
static size_t check_operand(const char *name, const void *p, const lt_layout *l)
{
    if (l->ld < 0 || (uint64_t)l->ld < l->rows || l->ld == 0)
        cudaemu_fail("cublasLtMatmul: the layout of %s has ld = %lld < rows = %llu (a "
                     "column-major [%llu x %llu] matrix needs ld >= rows)",
                     name, (long long)l->ld, (unsigned long long)l->rows,
                     (unsigned long long)l->rows, (unsigned long long)l->cols);
    size_t bytes = (size_t)span(l->rows, l->cols, l->ld) * lt_type_size(l->type);
    char what[128];
    snprintf(what, sizeof what, "%s ([%llu x %llu], ld %lld, %s: %zu bytes)", name,
             (unsigned long long)l->rows, (unsigned long long)l->cols, (long long)l->ld,
             type_name(l->type), bytes);
    if (!p)
        cudaemu_fail("cublasLtMatmul: %s is NULL", what);
    cudaemu_check_device_range(p, bytes, "cublasLtMatmul", what);
    return bytes;
}

static void check_alignment(const char *name, const void *p, uint64_t promised)
{
    if (promised > 1 && (uintptr_t)p % promised != 0)
        cudaemu_fail("cublasLtMatmul: %s = %p is not %llu-byte aligned, but the algorithm was "
                     "chosen by cublasLtMatmulAlgoGetHeuristic for operands with "
                     "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%s_BYTES = %llu",
                     name, p, (unsigned long long)promised, name, (unsigned long long)promised);
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
    cublasStatus_t s = lt_shape(d, la, lb, lc, ld, &m, &n, &k);
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
                  .b_cols = lb->cols };
    memcpy(&w.alpha, alpha, sizeof w.alpha); /* host scalars are read at the call */
    memcpy(&w.beta, beta, sizeof w.beta);

    cudaemu_access acc[6];
    int n_acc = 0;
    if (m > 0 && n > 0) {
        if (k > 0) {
            acc[n_acc++] = (cudaemu_access){ A, check_operand("A", A, la), 0 };
            acc[n_acc++] = (cudaemu_access){ B, check_operand("B", B, lb), 0 };
        }
        if (w.beta != 0.0f)
            acc[n_acc++] = (cudaemu_access){ C, check_operand("C", C, lc), 0 };
        acc[n_acc++] = (cudaemu_access){ D, check_operand("D", D, ld), 1 };
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
        check_alignment("A", A, algo->data[ALGO_ALIGN_A]);
        check_alignment("B", B, algo->data[ALGO_ALIGN_B]);
        if (w.beta != 0.0f)
            check_alignment("C", C, algo->data[ALGO_ALIGN_C]);
        check_alignment("D", D, algo->data[ALGO_ALIGN_D]);
    }
    if (workspaceSizeInBytes > 0) {
        if (!workspace)
            cudaemu_fail("cublasLtMatmul: workspace is NULL with workspaceSizeInBytes = %zu",
                         workspaceSizeInBytes);
        cudaemu_check_device_range(workspace, workspaceSizeInBytes, "cublasLtMatmul",
                                   "workspace");
        acc[n_acc++] = (cudaemu_access){ workspace, workspaceSizeInBytes, 1 };
    }
    if (m == 0 || n == 0) /* nothing to compute; the workspace check still held */
        return CUBLAS_STATUS_SUCCESS;
    mm_work *ctx = malloc(sizeof *ctx);
    if (!ctx)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *ctx = w;
    cudaemu_enqueue(stream, "cublasLtMatmul", run_matmul, ctx, free, acc, n_acc);
    return CUBLAS_STATUS_SUCCESS;
}
