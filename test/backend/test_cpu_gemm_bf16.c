/* The native bf16 GEMM (cpu_gemm_bf16.c, AVX512-BF16) through the backend's matmul,
 * against a double-precision product of the same bf16 values, for every transposition,
 * alpha/beta, fp32 and bf16 outputs, and shapes that cross each blocking edge (MR = 12
 * rows, NR = 32 columns, KC = 1024 k values (one block: a bf16 c rounded in registers;
 * more: through the fp32 workspace), NC = 4096 columns, odd k, k = 0); and the same
 * calls through the widening path (FT_CPU_ISA=avx512), which must meet the same bound.
 *
 * Bound per element: both paths sum exact bf16 products in fp32, so
 *   |got - ref| <= (k + 2) * 2^-24 * (|alpha| sum_p |a_ip b_pj| + |beta c_ij|)
 * (the classic bound for a sum of k terms, plus the alpha and beta terms), and a bf16
 * output adds its one rounding, 2^-8 |ref|. A bf16 output must moreover be exactly the
 * round-to-nearest-even of the fp32 output of the same call (same sums, same order).
 * Bitwise equality between 1 and 2 threads
 * holds because threads split tiles, never k; and an element's bits do not depend on
 * the tile it lands in: the columns of a c of at most 16 columns (a half-width tile,
 * LoRA's n = rank GEMMs) equal those of a wider c with the same leading columns.
 * Skips on a CPU without AVX512-BF16 (the widening path is tested by
 * test_cpu_bf16_ops there). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "backend/cpu/cpu_internal.h"
#include "backend_test_util.h"
#include "util/bf16.h"

typedef struct gemm_case {
    int m, n, k;
} gemm_case;

static const gemm_case cases[] = {
    { 1, 1, 1 },     { 13, 33, 1 },   { 12, 32, 256 },  { 11, 31, 255 }, { 37, 65, 513 },
    { 5, 4200, 40 }, { 100, 48, 1000 }, { 30, 40, 2101 }, { 1, 4097, 7 }, { 64, 64, 0 },
    /* LoRA's shapes: n = rank (half-width tiles, one column tile split by rows), m = rank */
    { 100, 16, 300 }, { 50, 5, 64 }, { 200, 16, 1100 }, { 16, 300, 700 },
};

static uint16_t *random_bf16(size_t n, bt_rng *r)
{
    uint16_t *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = ft_f32_to_bf16((float)bt_rng_uniform(r, -1, 1));
    return x;
}

static double bf(const uint16_t *x, size_t i) { return ft_bf16_to_f32(x[i]); }

/* Checks got (stored as ct) against the double product of a, b and c0. */
static bool check(const char *label, ft_dtype ct, const void *got, const uint16_t *a,
                  const uint16_t *b, const float *c0, gemm_case g, bool ta, bool tb, float alpha,
                  float beta)
{
    const int m = g.m, n = g.n, k = g.k;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0, mag = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? bf(a, (size_t)p * m + i) : bf(a, (size_t)i * k + p);
                double bv = tb ? bf(b, (size_t)j * k + p) : bf(b, (size_t)p * n + j);
                s += av * bv;
                mag += fabs(av * bv);
            }
            double c_in = beta == 0.0f ? 0.0 : c0[(size_t)i * n + j];
            double ref = alpha * s + beta * c_in;
            double tol = (k + 2) * ldexp(1.0, -24) * (fabs(alpha) * mag + fabs(beta * c_in));
            double v;
            if (ct == FT_DTYPE_BF16) {
                v = bf(got, (size_t)i * n + j);
                tol += ldexp(1.0, -8) * fabs(ref);
            } else {
                v = ((const float *)got)[(size_t)i * n + j];
            }
            if (!(fabs(v - ref) <= tol + 1e-30)) {
                print_error("%s m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g c=%s: c[%d,%d] = %.9g, "
                            "reference %.9g, bound %.3g\n",
                            label, m, n, k, ta, tb, alpha, beta,
                            ct == FT_DTYPE_BF16 ? "bf16" : "fp32", i, j, v, ref, tol);
                return false;
            }
        }
    return true;
}

/* One matmul through the backend; returns the output as stored (malloc'd). */
static void *run(ft_backend *be, ft_dtype ct, const uint16_t *a, const uint16_t *b,
                 const float *c0, gemm_case g, bool ta, bool tb, float alpha, float beta)
{
    const size_t mn = (size_t)g.m * g.n, es = ct == FT_DTYPE_BF16 ? 2 : 4;
    void *c = malloc(mn * es + 1);
    for (size_t i = 0; i < mn; i++) {
        float v = beta == 0.0f ? NAN : c0[i]; /* beta = 0 must not read c */
        if (ct == FT_DTYPE_BF16)
            ((uint16_t *)c)[i] = ft_f32_to_bf16(v);
        else
            ((float *)c)[i] = v;
    }
    ft_gemm_types t = { FT_DTYPE_BF16, FT_DTYPE_BF16, ct };
    be->ops->matmul(be, t, c, a, b, g.m, g.n, g.k, ta, tb, alpha, beta);
    return c;
}

static void sweep(ft_backend *be, const char *label, bool check_threads)
{
    bt_rng r = bt_rng_make(11);
    const float alphas[] = { 1.0f, -0.75f }, betas[] = { 0.0f, 1.0f, 0.5f };
    bool ok = true;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        gemm_case g = cases[ci];
        const size_t mk = (size_t)g.m * g.k, kn = (size_t)g.k * g.n, mn = (size_t)g.m * g.n;
        uint16_t *a = random_bf16(mk ? mk : 1, &r), *b = random_bf16(kn ? kn : 1, &r);
        float *c0 = malloc(mn * sizeof *c0), *f32_out = malloc(mn * sizeof *f32_out + 1);
        for (size_t i = 0; i < mn; i++) /* bf16-representable, so a bf16 c starts equal */
            c0[i] = ft_bf16_to_f32(ft_f32_to_bf16((float)bt_rng_uniform(&r, -1, 1)));
        for (int tr = 0; tr < 4; tr++)
            for (int ab = 0; ab < 6; ab++)
                for (int ct = 0; ct < 2; ct++) {
                    const bool ta = tr & 1, tb = tr >> 1;
                    const float alpha = alphas[ab / 3], beta = betas[ab % 3];
                    const ft_dtype cdt = ct ? FT_DTYPE_BF16 : FT_DTYPE_F32;
                    void *got = run(be, cdt, a, b, c0, g, ta, tb, alpha, beta);
                    ok = check(label, cdt, got, a, b, c0, g, ta, tb, alpha, beta) && ok;
                    if (!ct) {
                        memcpy(f32_out, got, mn * sizeof(float));
                    } else { /* same sums in the same order, then one rounding (RNE) */
                        for (size_t i = 0; i < mn; i++)
                            if (((uint16_t *)got)[i] != ft_f32_to_bf16(f32_out[i])) {
                                print_error("%s m=%d n=%d k=%d: bf16 c[%zu] = 0x%04x is not the "
                                            "rounding of the fp32 result %.9g (0x%04x)\n",
                                            label, g.m, g.n, g.k, i, ((uint16_t *)got)[i],
                                            f32_out[i], ft_f32_to_bf16(f32_out[i]));
                                ok = false;
                                break;
                            }
                    }
                    if (check_threads && ab == 1) {
                        omp_set_num_threads(1);
                        void *one = run(be, cdt, a, b, c0, g, ta, tb, alpha, beta);
                        omp_set_num_threads(2);
                        void *two = run(be, cdt, a, b, c0, g, ta, tb, alpha, beta);
                        if (memcmp(one, got, mn * (ct ? 2 : 4)) ||
                            memcmp(two, got, mn * (ct ? 2 : 4))) {
                            print_error("%s m=%d n=%d k=%d: results differ between 1 and 2 "
                                        "threads\n", label, g.m, g.n, g.k);
                            ok = false;
                        }
                        free(one);
                        free(two);
                    }
                    free(got);
                }
        free(a);
        free(b);
        free(c0);
        free(f32_out);
    }
    assert_true(ok);
}

/* op(b)'s first n columns of a wide product (full-width tiles) against the product of
 * those columns alone (n <= 16: half-width tiles): the same bits, fp32 and bf16 c. */
static void test_narrow_columns_match_wide(void **state)
{
    (void)state;
    if (!ft_cpu_gemm_bf16_available())
        skip();
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(12);
    const int m = 40, wide = 48, ks[] = { 300, 1100 }, ns[] = { 16, 7 };
    bool ok = true;
    for (int ki = 0; ki < 2; ki++)
        for (int ni = 0; ni < 2; ni++) {
            const int k = ks[ki], n = ns[ni];
            uint16_t *a = random_bf16((size_t)m * k, &r), *bw = random_bf16((size_t)k * wide, &r);
            uint16_t *bn = malloc((size_t)k * n * sizeof *bn);
            float *cw0 = malloc((size_t)m * wide * sizeof *cw0), *cn0 = malloc((size_t)m * n * sizeof *cn0);
            for (int i = 0; i < m * wide; i++)
                cw0[i] = ft_bf16_to_f32(ft_f32_to_bf16((float)bt_rng_uniform(&r, -1, 1)));
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++)
                    cn0[i * n + j] = cw0[i * wide + j];
            for (int tr = 0; tr < 4; tr++)
                for (int ct = 0; ct < 2; ct++) {
                    const bool ta = tr & 1, tb = tr >> 1;
                    for (int p = 0; p < k; p++) /* op(b)[p, j] for j < n: the same values */
                        for (int j = 0; j < n; j++)
                            if (tb)
                                bn[(size_t)j * k + p] = bw[(size_t)j * k + p];
                            else
                                bn[(size_t)p * n + j] = bw[(size_t)p * wide + j];
                    const ft_dtype cdt = ct ? FT_DTYPE_BF16 : FT_DTYPE_F32;
                    const size_t es = ct ? 2 : 4;
                    void *cw = run(be, cdt, a, bw, cw0, (gemm_case){ m, wide, k }, ta, tb, 1.5f, 0.5f);
                    void *cn = run(be, cdt, a, bn, cn0, (gemm_case){ m, n, k }, ta, tb, 1.5f, 0.5f);
                    for (int i = 0; i < m && ok; i++)
                        if (memcmp((char *)cn + (size_t)i * n * es, (char *)cw + (size_t)i * wide * es,
                                   (size_t)n * es)) {
                            print_error("m=%d n=%d k=%d ta=%d tb=%d c=%s: row %d differs from the "
                                        "wide product's\n", m, n, k, ta, tb, ct ? "bf16" : "fp32", i);
                            ok = false;
                        }
                    free(cw);
                    free(cn);
                }
            free(a);
            free(bw);
            free(bn);
            free(cw0);
            free(cn0);
        }
    assert_true(ok);
    ft_backend_destroy(be);
}

static void test_native_bf16_gemm(void **state)
{
    (void)state;
    if (!ft_cpu_gemm_bf16_available())
        skip();
    ft_backend *be = bt_backend_create();
    assert_true(((const ft_cpu_state *)be->impl)->bf16_gemm); /* the default takes it */
    sweep(be, "native", true);
    ft_backend_destroy(be);
}

static void test_widened_bf16_gemm(void **state)
{
    (void)state;
    if (!ft_cpu_gemm_bf16_available())
        skip();
    ft_backend *be = bt_backend_create_isa("avx512");
    assert_false(((const ft_cpu_state *)be->impl)->bf16_gemm);
    sweep(be, "widened", false);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native_bf16_gemm),
        cmocka_unit_test(test_widened_bf16_gemm),
        cmocka_unit_test(test_narrow_columns_match_wide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
