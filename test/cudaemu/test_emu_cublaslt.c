/* The CUDA harness's cuBLASLt (cudaemu_cublaslt.c, cudaemu_cublaslt_matmul.c), through
 * the cuBLASLt API with exactly the descriptors cuda/cuda_matmul.c builds for its
 * row-major c[m,n] = alpha op(a) op(b) + beta c, against a naive triple loop in double:
 *  - every (trans_a, trans_b), odd and non-square shapes, alpha and beta;
 *  - beta == 0 ignores C, even when C holds the NaN poison of fresh memory;
 *  - bf16 inputs with an fp32 result; a bf16 result rounded to nearest, ties to even;
 *  - the BIAS epilogue;
 *  - findings: ld < rows, an ld too large for the buffer, a host pointer, a short operand,
 *    a pointer less aligned than the heuristic was promised, a freed workspace, and an
 *    operand written by another stream without a wait. */
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
