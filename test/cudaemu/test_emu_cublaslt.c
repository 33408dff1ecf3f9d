/* The CUDA harness's cuBLASLt (cudaemu_cublaslt.c, cudaemu_cublaslt_matmul.c), through
 * the cuBLASLt API with exactly the descriptors cuda/cuda_matmul.c builds for its
 * row-major c[m,n] = alpha op(a) op(b) + beta c, against a naive triple loop in double:
 *  - every (trans_a, trans_b), odd and non-square shapes, alpha and beta;
 *  - beta == 0 ignores C, even when C holds the NaN poison of fresh memory;
 *  - bf16 inputs with an fp32 result; a bf16 result rounded to nearest, ties to even;
 *  - the BIAS epilogue;
 *  - findings: ld < rows, an ld too large for the buffer, a host pointer, a short operand,
 *    a pointer less aligned than the heuristic was promised, a freed workspace, and an
 *    operand written by another stream without a wait;
 *  - strided batches, in cuBLASLt's column-major terms (the backend's two GEMMs of one
 *    shape in one call): bitwise the unbatched calls on each batch's pointers, with a
 *    shared (stride 0) operand, beta != 0 and in place; the statuses of negative strides
 *    and unequal batch counts; the findings of overlapping D batches, an operand whose
 *    last batch runs past its allocation, in-place C and D with different strides, and a
 *    batch pointer less aligned than promised. */
#include "emu_test_util.h"

#include <math.h>
#include <stdint.h>

#include <cublasLt.h>

#include "cudaemu.h"
#include "util/bf16.h"

#define CHECK(call) assert_int_equal((call), cudaSuccess)
#define LT(call) assert_int_equal((call), CUBLAS_STATUS_SUCCESS)
#define WORKSPACE ((size_t)1 << 20)

static cublasLtHandle_t g_lt;
static void *g_ws;

static unsigned ptr_align(const void *p)
{
    unsigned a = 256;
    while (a > 1 && ((uintptr_t)p & (a - 1)) != 0)
        a >>= 1;
    return a;
}

/* The operands and options of one row-major matmul, as cuda_matmul.c sees them. */
typedef struct mm {
    int m, n, k, trans_a, trans_b;
    float alpha, beta;
    cudaDataType_t in_type, out_type;
    const void *bias; /* fp32 device vector of n (cuBLAS's rows of D), or NULL */
    int64_t ld_delta_b; /* added to the layout's ld of our b, to test wrong lds */
    unsigned promise_b; /* alignment promised for our b, 0: its real alignment */
    size_t workspace;
    void *ws;
    cudaStream_t stream;
} mm;

/* cuda_matmul.c's plan_build and call: c^T [n,m] = op(b)^T op(a)^T in column-major terms,
 * cuBLAS's A being our b and its B our a. */
static cublasStatus_t run_mm(const mm *o, void *c, const void *a, const void *b)
{
    cublasOperation_t op_first = o->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = o->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t b_rows = o->trans_b ? (uint64_t)o->k : (uint64_t)o->n;
    uint64_t b_cols = o->trans_b ? (uint64_t)o->n : (uint64_t)o->k;
    uint64_t a_rows = o->trans_a ? (uint64_t)o->m : (uint64_t)o->k;
    uint64_t a_cols = o->trans_a ? (uint64_t)o->k : (uint64_t)o->m;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                      sizeof op_second));
    if (o->bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        int32_t bias_type = CUDA_R_32F;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o->bias,
                                          sizeof o->bias));
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                          sizeof bias_type));
    }
    LT(cublasLtMatrixLayoutCreate(&la, o->in_type, b_rows, b_cols,
                                  (int64_t)b_rows + o->ld_delta_b));
    LT(cublasLtMatrixLayoutCreate(&lb, o->in_type, a_rows, a_cols, (int64_t)a_rows));
    LT(cublasLtMatrixLayoutCreate(&lc, o->out_type, (uint64_t)o->n, (uint64_t)o->m,
                                  (int64_t)o->n));

    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = o->workspace;
    uint32_t al_first = o->promise_b ? o->promise_b : ptr_align(b), al_second = ptr_align(a),
             al_c = ptr_align(c);
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                            &al_first, sizeof al_first));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                            &al_second, sizeof al_second));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                            &al_c, sizeof al_c));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                            &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t result;
    int count = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(g_lt, desc, la, lb, lc, lc, pref, 1, &result, &count));
    assert_int_equal(count, 1);
    LT(cublasLtMatmulPreferenceDestroy(pref));
    cublasStatus_t s = cublasLtMatmul(g_lt, desc, &o->alpha, b, la, a, lb, &o->beta, c, lc, c, lc,
                                      &result.algo, o->ws, o->workspace, o->stream);
    LT(cublasLtMatrixLayoutDestroy(la));
    LT(cublasLtMatrixLayoutDestroy(lb));
    LT(cublasLtMatrixLayoutDestroy(lc));
    LT(cublasLtMatmulDescDestroy(desc));
    return s;
}

/* ------------------------------------------------------------ data */

static uint64_t g_rng = 12345;

static float rnd(void) /* in [-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static void *to_device(const void *h, size_t bytes)
{
    void *d = NULL;
    CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* Row-major reference: c[i,j] = alpha sum_p op(a)[i,p] op(b)[p,j] + beta c[i,j] + bias[j]. */
static void reference(const mm *o, double *out, const float *a, const float *b, const float *c,
                      const float *bias)
{
    for (int i = 0; i < o->m; i++)
        for (int j = 0; j < o->n; j++) {
            double sum = 0;
            for (int p = 0; p < o->k; p++) {
                double av = o->trans_a ? a[(size_t)p * o->m + i] : a[(size_t)i * o->k + p];
                double bv = o->trans_b ? b[(size_t)j * o->k + p] : b[(size_t)p * o->n + j];
                sum += av * bv;
            }
            double v = o->alpha * sum;
            if (o->beta != 0.0f)
                v += o->beta * (double)c[(size_t)i * o->n + j];
            if (bias)
                v += bias[j];
            out[(size_t)i * o->n + j] = v;
        }
}

/* One fp32 matmul against the reference; c starts as random values (or poison). */
static void check_f32(int m, int n, int k, int ta, int tb, float alpha, float beta, int poison_c,
                      int with_bias)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *got = malloc(nc * 4);
    float bias[64];
    double *want = malloc(nc * sizeof *want);
    for (size_t i = 0; i < na; i++)
        a[i] = rnd();
    for (size_t i = 0; i < nb; i++)
        b[i] = rnd();
    for (size_t i = 0; i < nc; i++)
        c[i] = rnd();
    for (int i = 0; i < n; i++)
        bias[i] = rnd();
    void *da = to_device(a, na * 4), *db = to_device(b, nb * 4), *dc = NULL;
    void *dbias = with_bias ? to_device(bias, (size_t)n * 4) : NULL;
    if (poison_c)
        CHECK(cudaMalloc(&dc, nc * 4)); /* all NaN */
    else
        dc = to_device(c, nc * 4);
    mm o = { .m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .alpha = alpha, .beta = beta,
             .in_type = CUDA_R_32F, .out_type = CUDA_R_32F, .bias = dbias,
             .workspace = WORKSPACE, .ws = g_ws };
    LT(run_mm(&o, dc, da, db));
    CHECK(cudaMemcpy(got, dc, nc * 4, cudaMemcpyDeviceToHost));
    reference(&o, want, a, b, c, with_bias ? bias : NULL);
    for (size_t i = 0; i < nc; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-5 * (k + 1) * (1 + fabs(want[i])))) {
            fprintf(stderr, "m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g: [%zu] %g != %g\n", m,
                    n, k, ta, tb, alpha, beta, i, got[i], want[i]);
            fail();
        }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    CHECK(cudaFree(dbias));
    free(a);
    free(b);
    free(c);
    free(got);
    free(want);
}

static void test_transpositions(void **state)
{
    (void)state;
    static const int shapes[][3] = { { 1, 1, 1 }, { 5, 7, 3 }, { 33, 17, 65 }, { 4, 64, 9 } };
    for (int s = 0; s < 4; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_f32(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, 1.0f, 0.0f, 0, 0);
                check_f32(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, 1.5f, 0.5f, 0, 0);
                check_f32(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, -0.25f, 1.0f, 0, 0);
            }
}

static void test_beta_zero_ignores_c(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        check_f32(9, 6, 5, ta, 1 - ta, 2.0f, 0.0f, 1, 0);
}

static void test_bias_epilogue(void **state)
{
    (void)state;
    check_f32(7, 5, 3, 0, 0, 1.0f, 0.0f, 1, 1);
    check_f32(7, 5, 3, 1, 0, 0.5f, 2.0f, 0, 1);
}

/* bf16 a and b; the result in fp32 or in bf16. */
static void check_bf16(int m, int n, int k, int ta, int tb, cudaDataType_t out_type)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    uint16_t *a16 = malloc(na * 2), *b16 = malloc(nb * 2), *c16 = malloc(nc * 2);
    float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4), *got = malloc(nc * 4);
    double *want = malloc(nc * sizeof *want);
    for (size_t i = 0; i < na; i++)
        a[i] = ft_bf16_to_f32(a16[i] = ft_f32_to_bf16(rnd()));
    for (size_t i = 0; i < nb; i++)
        b[i] = ft_bf16_to_f32(b16[i] = ft_f32_to_bf16(rnd()));
    for (size_t i = 0; i < nc; i++)
        c[i] = ft_bf16_to_f32(c16[i] = ft_f32_to_bf16(rnd()));
    size_t out_size = out_type == CUDA_R_16BF ? 2 : 4;
    void *da = to_device(a16, na * 2), *db = to_device(b16, nb * 2);
    void *dc = to_device(out_type == CUDA_R_16BF ? (void *)c16 : (void *)c, nc * out_size);
    mm o = { .m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .alpha = 1.0f, .beta = 1.0f,
             .in_type = CUDA_R_16BF, .out_type = out_type, .workspace = WORKSPACE, .ws = g_ws };
    LT(run_mm(&o, dc, da, db));
    reference(&o, want, a, b, c, NULL);
    if (out_type == CUDA_R_16BF) {
        uint16_t *got16 = malloc(nc * 2);
        CHECK(cudaMemcpy(got16, dc, nc * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nc; i++) {
            /* Rounded once from an fp32 sum: at most one bf16 step from the rounded
             * exact value (the fp32 sum may fall on the other side of a tie). */
            int diff = (int)ft_f32_to_bf16((float)want[i]) - (int)got16[i];
            assert_true(diff >= -1 && diff <= 1);
        }
        free(got16);
    } else {
        CHECK(cudaMemcpy(got, dc, nc * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nc; i++)
            assert_true(fabs(got[i] - want[i]) <= 1e-5 * (k + 1) * (1 + fabs(want[i])));
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    free(a16); free(b16); free(c16); free(a); free(b); free(c); free(got); free(want);
}

static void test_bf16(void **state)
{
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_bf16(6, 10, 7, ta, tb, CUDA_R_32F);
            check_bf16(6, 10, 7, ta, tb, CUDA_R_16BF);
        }
}

/* 1 x 1 x 1 with alpha putting the fp32 result exactly on a bf16 tie: round to even. */
static void test_bf16_ties_to_even(void **state)
{
    (void)state;
    static const struct { float alpha; uint16_t want; } cases[] = {
        { 1.0f + 1.0f / 256, 0x3f80 },  /* halfway between 1 and 1 + 2^-7: down to even */
        { 1.0f + 3.0f / 256, 0x3f82 },  /* halfway between 1 + 2^-7 and 1 + 2^-6: up to even */
        { -(1.0f + 1.0f / 256), 0xbf80 },
    };
    uint16_t one = 0x3f80;
    void *da = to_device(&one, 2), *db = to_device(&one, 2), *dc = NULL;
    CHECK(cudaMalloc(&dc, 2));
    for (int i = 0; i < 3; i++) {
        mm o = { .m = 1, .n = 1, .k = 1, .alpha = cases[i].alpha, .beta = 0.0f,
                 .in_type = CUDA_R_16BF, .out_type = CUDA_R_16BF };
        LT(run_mm(&o, dc, da, db));
        uint16_t got = 0;
        CHECK(cudaMemcpy(&got, dc, 2, cudaMemcpyDeviceToHost));
        assert_int_equal(got, cases[i].want);
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
}

/* ------------------------------------------------------------ findings */

typedef struct bad_case {
    int64_t ld_delta_b;
    int host_b, short_a, misalign_b, freed_ws;
} bad_case;

/* m = 4, n = 8, k = 6 with one defect. */
static void bad_matmul(void *arg)
{
    const bad_case *bc = arg;
    float host_b[48] = { 0 };
    float *a = NULL, *b = NULL, *c = NULL;
    void *ws = NULL;
    cudaMalloc((void **)&a, (bc->short_a ? 23 : 24) * sizeof(float));
    cudaMalloc((void **)&b, 49 * sizeof(float));
    cudaMalloc((void **)&c, 32 * sizeof(float));
    cudaMalloc(&ws, WORKSPACE);
    if (bc->freed_ws)
        cudaFree(ws);
    mm o = { .m = 4, .n = 8, .k = 6, .alpha = 1.0f, .beta = 0.0f, .in_type = CUDA_R_32F,
             .out_type = CUDA_R_32F, .ld_delta_b = bc->ld_delta_b, .workspace = WORKSPACE,
             .ws = ws, .promise_b = bc->misalign_b ? 16 : 0 };
    const float *bb = bc->host_b ? host_b : bc->misalign_b ? b + 1 : b;
    run_mm(&o, c, a, bb);
    cudaDeviceSynchronize();
}

static void test_findings(void **state)
{
    (void)state;
    bad_case ld_small = { .ld_delta_b = -1 }, ld_large = { .ld_delta_b = 1 },
             host = { .host_b = 1 }, shrt = { .short_a = 1 }, mis = { .misalign_b = 1 },
             ws = { .freed_ws = 1 };
    expect_finding(bad_matmul, &ld_small, "cublasLtMatmul", "layout of A has ld = 7 < rows = 8",
                   NULL);
    /* ld 9 instead of 8: the 6 columns span 5 * 9 + 8 = 53 floats of a 49-float buffer. */
    expect_finding(bad_matmul, &ld_large, "cublasLtMatmul", "A ([8 x 6], ld 9",
                   "runs 16 bytes past the end", NULL);
    expect_finding(bad_matmul, &host, "cublasLtMatmul", "A ([8 x 6], ld 8",
                   "not inside a live device allocation", NULL);
    expect_finding(bad_matmul, &shrt, "cublasLtMatmul", "B ([6 x 4], ld 6",
                   "runs 4 bytes past the end", NULL);
    expect_finding(bad_matmul, &mis, "cublasLtMatmul", "is not 16-byte aligned",
                   "MIN_ALIGNMENT_A_BYTES = 16", NULL);
    expect_finding(bad_matmul, &ws, "cublasLtMatmul", "workspace", "freed by cudaFree", NULL);
}

/* The matmul reads a on stream s2 while s1's upload of a is not waited for. */
static void unordered_operand(void *arg)
{
    (void)arg;
    cudaStream_t s1, s2;
    float h[24] = { 0 };
    float *a = NULL, *b = NULL, *c = NULL;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaMalloc((void **)&a, sizeof h);
    cudaMalloc((void **)&b, 48 * sizeof(float));
    cudaMalloc((void **)&c, 32 * sizeof(float));
    cudaMemsetAsync(b, 0, 48 * sizeof(float), s2);
    cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s1);
    mm o = { .m = 4, .n = 8, .k = 6, .alpha = 1.0f, .in_type = CUDA_R_32F,
             .out_type = CUDA_R_32F, .stream = s2 };
    run_mm(&o, c, a, b);
}

static void test_race_reported(void **state)
{
    (void)state;
    expect_finding(unordered_operand, NULL, "race", "cublasLtMatmul on stream",
                   "not ordered after cudaMemcpyAsync(HostToDevice)", NULL);
}

static void test_status_strings(void **state)
{
    (void)state;
    assert_string_equal(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
    assert_non_null(strstr(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "not supported"));
    assert_non_null(strstr(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "invalid"));
    /* A shape mismatch is refused by the heuristic, with no algorithm. */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l23, l34;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t r;
    int count = 7;
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatrixLayoutCreate(&l23, CUDA_R_32F, 2, 3, 2));
    LT(cublasLtMatrixLayoutCreate(&l34, CUDA_R_32F, 3, 4, 3));
    LT(cublasLtMatmulPreferenceCreate(&pref));
    assert_int_equal(cublasLtMatmulAlgoGetHeuristic(g_lt, desc, l23, l23, l34, l34, pref, 1, &r,
                                                    &count),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(count, 0);
    cublasComputeType_t tf32 = CUBLAS_COMPUTE_32F_FAST_TF32;
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &tf32, sizeof tf32));
    assert_int_equal(cublasLtMatmulAlgoGetHeuristic(g_lt, desc, l23, l34, l23, l23, pref, 1, &r,
                                                    &count),
                     CUBLAS_STATUS_NOT_SUPPORTED);
    LT(cublasLtMatmulPreferenceDestroy(pref));
    LT(cublasLtMatrixLayoutDestroy(l23));
    LT(cublasLtMatrixLayoutDestroy(l34));
    LT(cublasLtMatmulDescDestroy(desc));
}

/* ------------------------------------------------------------ strided batches */

enum { OP_A, OP_B, OP_C, OP_D };

/* One column-major cublasLtMatmul: op(A) [m,k], op(B) [k,n], C and D [m,n], each with
 * ld = rows. With `batched`, every layout gets BATCH_COUNT batch[i] and
 * STRIDED_BATCH_OFFSET stride[i]; without, the attributes are left unset (an unbatched
 * call, as the backend makes today). */
typedef struct lt_call {
    cudaDataType_t in_type, out_type;
    int m, n, k, trans_a, trans_b;
    int batched;
    int32_t batch[4];
    int64_t stride[4];
    float alpha, beta;
    unsigned promise; /* the alignment promised for every operand; 0: its element size */
    const void *a, *b, *c;
    void *d;
} lt_call;

static size_t type_bytes(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

static void op_dims(const lt_call *o, int op, uint64_t *rows, uint64_t *cols)
{
    uint64_t m = (uint64_t)o->m, n = (uint64_t)o->n, k = (uint64_t)o->k;
    if (op == OP_A) {
        *rows = o->trans_a ? k : m;
        *cols = o->trans_a ? m : k;
    } else if (op == OP_B) {
        *rows = o->trans_b ? n : k;
        *cols = o->trans_b ? k : n;
    } else {
        *rows = m;
        *cols = n;
    }
}

/* Elements one batch of an operand spans (ld = rows: rows * cols). */
static size_t op_span(const lt_call *o, int op)
{
    uint64_t rows, cols;
    op_dims(o, op, &rows, &cols);
    return (size_t)(rows * cols);
}

static cublasLtMatrixLayout_t op_layout(const lt_call *o, int op)
{
    uint64_t rows, cols;
    op_dims(o, op, &rows, &cols);
    cublasLtMatrixLayout_t l;
    LT(cublasLtMatrixLayoutCreate(&l, op <= OP_B ? o->in_type : o->out_type, rows, cols,
                                  (int64_t)rows));
    if (o->batched) {
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &o->batch[op],
                                            sizeof o->batch[op]));
        LT(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &o->stride[op], sizeof o->stride[op]));
    }
    return l;
}

/* The heuristic, then the matmul with its algorithm; when the heuristic refuses, its
 * status, which the matmul (without an algorithm) must give too. */
static cublasStatus_t lt_run(const lt_call *o)
{
    cublasOperation_t ta = o->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = o->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDesc_t desc;
    LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t l[4];
    for (int op = 0; op < 4; op++)
        l[op] = op_layout(o, op);
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = WORKSPACE;
    uint32_t al_in = o->promise ? o->promise : (uint32_t)type_bytes(o->in_type);
    uint32_t al_out = o->promise ? o->promise : (uint32_t)type_bytes(o->out_type);
    static const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
    };
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    for (int op = 0; op < 4; op++)
        LT(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[op],
                                                op <= OP_B ? &al_in : &al_out, sizeof al_in));
    cublasLtMatmulHeuristicResult_t result;
    int count = -1;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, desc, l[OP_A], l[OP_B], l[OP_C],
                                                      l[OP_D], pref, 1, &result, &count);
    if (s == CUBLAS_STATUS_SUCCESS) {
        assert_int_equal(count, 1);
        s = cublasLtMatmul(g_lt, desc, &o->alpha, o->a, l[OP_A], o->b, l[OP_B], &o->beta, o->c,
                           l[OP_C], o->d, l[OP_D], &result.algo, g_ws, WORKSPACE, NULL);
    } else {
        assert_int_equal(count, 0);
        assert_int_equal(cublasLtMatmul(g_lt, desc, &o->alpha, o->a, l[OP_A], o->b, l[OP_B],
                                        &o->beta, o->c, l[OP_C], o->d, l[OP_D], NULL, g_ws,
                                        WORKSPACE, NULL),
                         s);
    }
    LT(cublasLtMatmulPreferenceDestroy(pref));
    for (int op = 0; op < 4; op++)
        LT(cublasLtMatrixLayoutDestroy(l[op]));
    LT(cublasLtMatmulDescDestroy(desc));
    return s;
}

/* n random values, exactly representable in type t. */
static float *rnd_values(size_t n, cudaDataType_t t)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = t == CUDA_R_16BF ? ft_bf16_to_f32(ft_f32_to_bf16(rnd())) : rnd();
    return v;
}

/* A device copy of n values in type t. */
static void *upload(const float *v, size_t n, cudaDataType_t t)
{
    if (t == CUDA_R_32F)
        return to_device(v, n * 4);
    uint16_t *h = malloc((n ? n : 1) * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = ft_f32_to_bf16(v[i]);
    void *d = to_device(h, n * 2);
    free(h);
    return d;
}

/* The n values of type t at device pointer d, widened to fp32. */
static float *download(const void *d, size_t n, cudaDataType_t t)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (t == CUDA_R_32F) {
        CHECK(cudaMemcpy(v, d, n * 4, cudaMemcpyDeviceToHost));
        return v;
    }
    uint16_t *h = malloc((n ? n : 1) * 2);
    CHECK(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        v[i] = ft_bf16_to_f32(h[i]);
    free(h);
    return v;
}

static const void *offset(const void *p, int64_t elems, size_t size)
{
    return (const char *)p + (size_t)elems * size;
}

/* Element [r, c] of op(X) for an operand with ld = rows, batch `i`. */
static double op_at(const lt_call *o, int op, const float *x, int i, int r, int c)
{
    uint64_t rows, cols;
    op_dims(o, op, &rows, &cols);
    int trans = op == OP_A ? o->trans_a : op == OP_B ? o->trans_b : 0;
    size_t at = (size_t)(i * o->stride[op]) + (trans ? (size_t)c + (size_t)r * rows
                                                       : (size_t)r + (size_t)c * rows);
    return x[at];
}

/* The batched result against a host reference in double: D_i = alpha op(A_i) op(B_i) +
 * beta C_i; D's elements outside every batch keep their initial values d0. */
static void check_reference(const lt_call *o, const float *got, const float *a, const float *b,
                            const float *c, const float *d0, size_t d_elems)
{
    char *in_batch = calloc(d_elems, 1);
    for (int i = 0; i < o->batch[OP_D]; i++)
        for (int col = 0; col < o->n; col++)
            for (int r = 0; r < o->m; r++) {
                double sum = 0;
                for (int p = 0; p < o->k; p++)
                    sum += op_at(o, OP_A, a, i, r, p) * op_at(o, OP_B, b, i, p, col);
                double want = o->alpha * sum;
                if (o->beta != 0.0f)
                    want += o->beta * op_at(o, OP_C, c, i, r, col);
                size_t at = (size_t)(i * o->stride[OP_D]) + (size_t)r + (size_t)col * (size_t)o->m;
                in_batch[at] = 1;
                if (o->out_type == CUDA_R_16BF) {
                    int diff = (int)ft_f32_to_bf16((float)want) - (int)ft_f32_to_bf16(got[at]);
                    assert_true(diff >= -1 && diff <= 1);
                } else {
                    assert_true(fabs(got[at] - want) <= 1e-5 * (o->k + 1) * (1 + fabs(want)));
                }
            }
    for (size_t e = 0; e < d_elems; e++)
        if (!in_batch[e])
            assert_true(memcmp(&got[e], &d0[e], sizeof got[e]) == 0);
    free(in_batch);
}

/* One batched case: two GEMMs of one shape, one operand shared (stride 0) or none. */
typedef struct batch_case {
    cudaDataType_t in_type, out_type;
    int trans_a, trans_b;
    int shared;   /* OP_A or OP_B: the operand with stride 0; -1: none */
    float beta;
    int in_place; /* C == D, one layout */
} batch_case;

/* Runs bc batched (batch 2; strides with gaps between the batches) and as two unbatched
 * calls on each batch's pointers, into two copies of one initial D: the two Ds must be
 * bitwise equal, and equal to a host reference. */
static void check_batched(const batch_case *bc)
{
    lt_call o = { .in_type = bc->in_type, .out_type = bc->out_type, .m = 5, .n = 7, .k = 6,
                  .trans_a = bc->trans_a, .trans_b = bc->trans_b, .batched = 1,
                  .batch = { 2, 2, 2, 2 }, .alpha = 0.75f, .beta = bc->beta };
    /* Odd gaps, so that a batch starting one element off would show. */
    o.stride[OP_A] = bc->shared == OP_A ? 0 : (int64_t)op_span(&o, OP_A) + 3;
    o.stride[OP_B] = bc->shared == OP_B ? 0 : (int64_t)op_span(&o, OP_B) + 1;
    o.stride[OP_C] = (int64_t)op_span(&o, OP_C) + 2;
    o.stride[OP_D] = bc->in_place ? o.stride[OP_C] : (int64_t)op_span(&o, OP_D) + 1;
    size_t ext[4];
    for (int op = 0; op < 4; op++)
        ext[op] = op_span(&o, op) + (size_t)o.stride[op];
    size_t in_size = type_bytes(bc->in_type), out_size = type_bytes(bc->out_type);
    float *a = rnd_values(ext[OP_A], bc->in_type), *b = rnd_values(ext[OP_B], bc->in_type);
    float *c = rnd_values(ext[OP_C], bc->out_type), *d0 = rnd_values(ext[OP_D], bc->out_type);
    void *da = upload(a, ext[OP_A], bc->in_type), *db = upload(b, ext[OP_B], bc->in_type);
    void *dc = upload(c, ext[OP_C], bc->out_type);
    void *d_batched = upload(bc->in_place ? c : d0, ext[OP_D], bc->out_type);
    void *d_separate = upload(bc->in_place ? c : d0, ext[OP_D], bc->out_type);

    o.a = da, o.b = db, o.d = d_batched;
    o.c = bc->in_place ? d_batched : dc;
    LT(lt_run(&o));
    for (int i = 0; i < 2; i++) {
        lt_call one = o;
        one.batched = 0;
        one.a = offset(da, i * o.stride[OP_A], in_size);
        one.b = offset(db, i * o.stride[OP_B], in_size);
        one.d = (void *)offset(d_separate, i * o.stride[OP_D], out_size);
        one.c = bc->in_place ? one.d : offset(dc, i * o.stride[OP_C], out_size);
        LT(lt_run(&one));
    }

    size_t d_bytes = ext[OP_D] * out_size;
    char *raw_batched = malloc(d_bytes), *raw_separate = malloc(d_bytes);
    CHECK(cudaMemcpy(raw_batched, d_batched, d_bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(raw_separate, d_separate, d_bytes, cudaMemcpyDeviceToHost));
    assert_memory_equal(raw_batched, raw_separate, d_bytes);
    float *got = download(d_batched, ext[OP_D], bc->out_type);
    check_reference(&o, got, a, b, c, bc->in_place ? c : d0, ext[OP_D]);

    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    CHECK(cudaFree(d_batched));
    CHECK(cudaFree(d_separate));
    free(a); free(b); free(c); free(d0); free(got); free(raw_batched); free(raw_separate);
}

/* beta == 0, a shared A or B: bf16 in and out, bf16 in with fp32 out, fp32 in and out. */
static void test_batched_equals_separate(void **state)
{
    (void)state;
    static const cudaDataType_t types[][2] = { { CUDA_R_16BF, CUDA_R_16BF },
                                               { CUDA_R_16BF, CUDA_R_32F },
                                               { CUDA_R_32F, CUDA_R_32F } };
    for (int t = 0; t < 3; t++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int shared = OP_A; shared <= OP_B; shared++) {
                    batch_case bc = { types[t][0], types[t][1], ta, tb, shared, 0.0f, 0 };
                    check_batched(&bc);
                }
}

/* beta != 0 with a batched C, separate from D and in place. */
static void test_batched_beta(void **state)
{
    (void)state;
    static const cudaDataType_t types[][2] = { { CUDA_R_16BF, CUDA_R_16BF },
                                               { CUDA_R_32F, CUDA_R_32F } };
    for (int t = 0; t < 2; t++)
        for (int in_place = 0; in_place < 2; in_place++) {
            batch_case shared_b = { types[t][0], types[t][1], 1, 0, OP_B, 1.0f, in_place };
            batch_case none = { types[t][0], types[t][1], 0, 1, -1, -0.5f, in_place };
            check_batched(&shared_b);
            check_batched(&none);
        }
}

/* m = 4, n = 3, k = 2 in fp32, batch 2: A, B, C, D of 8, 6, 12, 12 elements a batch. */
static lt_call small_batch(void)
{
    lt_call o = { .in_type = CUDA_R_32F, .out_type = CUDA_R_32F, .m = 4, .n = 3, .k = 2,
                  .batched = 1, .batch = { 2, 2, 2, 2 }, .stride = { 8, 0, 12, 12 },
                  .alpha = 1.0f };
    return o;
}

static void test_batch_status(void **state)
{
    (void)state;
    float *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    CHECK(cudaMalloc((void **)&a, 16 * 4));
    CHECK(cudaMalloc((void **)&b, 6 * 4));
    CHECK(cudaMalloc((void **)&c, 24 * 4));
    CHECK(cudaMalloc((void **)&d, 24 * 4));
    lt_call o = small_batch();
    o.a = a, o.b = b, o.c = c, o.d = d;
    LT(lt_run(&o));

    lt_call neg = o; /* cuBLASLt allows it; the emulation refuses it */
    neg.stride[OP_A] = -8;
    assert_int_equal(lt_run(&neg), CUBLAS_STATUS_NOT_SUPPORTED);
    neg = o;
    neg.stride[OP_D] = -12;
    assert_int_equal(lt_run(&neg), CUBLAS_STATUS_NOT_SUPPORTED);
    lt_call one = o; /* with batch count 1 the stride is never used */
    for (int op = 0; op < 4; op++)
        one.batch[op] = 1, one.stride[op] = -5;
    LT(lt_run(&one));

    lt_call unequal = o;
    unequal.batch[OP_B] = 1; /* a count of 1 is not broadcast */
    assert_int_equal(lt_run(&unequal), CUBLAS_STATUS_INVALID_VALUE);
    unequal = o;
    unequal.batch[OP_D] = 3;
    assert_int_equal(lt_run(&unequal), CUBLAS_STATUS_INVALID_VALUE);
    lt_call zero = o;
    for (int op = 0; op < 4; op++)
        zero.batch[op] = 0;
    assert_int_equal(lt_run(&zero), CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    CHECK(cudaFree(d));
}

typedef struct bad_batch {
    int overlap_d, short_a, in_place_strides, misalign_a;
} bad_batch;

/* small_batch with one defect. */
static void bad_batched(void *arg)
{
    const bad_batch *bb = arg;
    float *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    cudaMalloc((void **)&a, (bb->short_a ? 15 : 18) * sizeof(float));
    cudaMalloc((void **)&b, 6 * sizeof(float));
    cudaMalloc((void **)&c, 24 * sizeof(float));
    cudaMalloc((void **)&d, 26 * sizeof(float));
    lt_call o = small_batch();
    o.a = a, o.b = b, o.c = c, o.d = d;
    if (bb->overlap_d)
        o.stride[OP_D] = 11;
    if (bb->in_place_strides) {
        o.beta = 1.0f;
        o.c = d;
        o.stride[OP_D] = 13;
    }
    if (bb->misalign_a) {
        o.promise = 16;
        o.stride[OP_A] = 9; /* batch 1 at 36 bytes */
    }
    lt_run(&o);
    cudaDeviceSynchronize();
}

static void test_batch_findings(void **state)
{
    (void)state;
    bad_batch overlap = { .overlap_d = 1 }, shrt = { .short_a = 1 },
              in_place = { .in_place_strides = 1 }, mis = { .misalign_a = 1 };
    expect_finding(bad_batched, &overlap, "cublasLtMatmul",
                   "D ([4 x 3], ld 4, batch count 2, stride 11 elements)",
                   "the batches of D overlap", "race", NULL);
    /* 8 + 8 floats over both batches, in a 15-float buffer: batch 1 runs past its end. */
    expect_finding(bad_batched, &shrt, "cublasLtMatmul",
                   "A ([4 x 2], ld 4, batch count 2, stride 8 elements, CUDA_R_32F: batch 1, 32 bytes)",
                   "runs 4 bytes past the end", NULL);
    expect_finding(bad_batched, &in_place, "cublasLtMatmul", "C and D are the same pointer",
                   "C ([4 x 3], ld 4, batch count 2, stride 12 elements)",
                   "D ([4 x 3], ld 4, batch count 2, stride 13 elements)", NULL);
    expect_finding(bad_batched, &mis, "cublasLtMatmul",
                   "A of batch 1 (batch count 2, stride 9 elements)", "is not 16-byte aligned",
                   "MIN_ALIGNMENT_A_BYTES = 16", NULL);
}

static int setup(void **state)
{
    (void)state;
    if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&g_ws, WORKSPACE) != cudaSuccess)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cudaFree(g_ws);
    return cublasLtDestroy(g_lt) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

int main(void)
{
    unsetenv("CUDAEMU_RACECHECK");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpositions),
        cmocka_unit_test(test_beta_zero_ignores_c),
        cmocka_unit_test(test_bias_epilogue),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_bf16_ties_to_even),
        cmocka_unit_test(test_findings),
        cmocka_unit_test(test_race_reported),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_batched_equals_separate),
        cmocka_unit_test(test_batched_beta),
        cmocka_unit_test(test_batch_status),
        cmocka_unit_test(test_batch_findings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
