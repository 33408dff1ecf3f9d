/* matmul (all transposition combinations, alpha/beta) against a naive double
 * product, and add / scale / sum_squares.
 * Tolerance for matmul: |err| <= 1e-5 * max|ref| + 1e-6 (fp32 sums of <= 67 terms). */
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

#include "backend_test_util.h"

/* c = alpha op(a) op(b) + beta c in double; a is [m,k] or [k,m] (trans_a), b is
 * [k,n] or [n,k] (trans_b). */
static void naive_matmul(double *c, const float *a, const float *b, const float *c0, int m, int n,
                         int k, bool ta, bool tb, double alpha, double beta)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
                double bv = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
                s += av * bv;
            }
            c[(size_t)i * n + j] = alpha * s + (beta == 0.0 ? 0.0 : beta * c0[(size_t)i * n + j]);
        }
}

static void test_matmul_all_transpositions(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(5);
    const int m = 37, n = 29, k = 67;
    const float alphas[] = {1.0f, 0.7f}, betas[] = {0.0f, 0.3f};
    float *a = malloc((size_t)m * k * 4), *b = malloc((size_t)k * n * 4);
    float *c0 = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
    double *want = malloc((size_t)m * n * 8);
    bt_fill_uniform(a, (size_t)m * k, &r, -1, 1);
    bt_fill_uniform(b, (size_t)k * n, &r, -1, 1);
    bool ok = true;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int ab = 0; ab < 4; ab++) {
                float alpha = alphas[ab / 2], beta = betas[ab % 2];
                bt_fill_uniform(c0, (size_t)m * n, &r, -1, 1);
                if (beta == 0.0f) /* beta = 0 must not read c: NaN there must not leak */
                    for (int i = 0; i < m * n; i++)
                        c0[i] = NAN;
                float *da = bt_upload(be, a, (size_t)m * k), *db = bt_upload(be, b, (size_t)k * n);
                float *dc = bt_upload(be, c0, (size_t)m * n);
                be->ops->matmul(be, FT_GEMM_F32, dc, da, db, m, n, k, ta, tb, alpha, beta);
                bt_download(be, got, dc, (size_t)m * n);
                naive_matmul(want, a, b, c0, m, n, k, ta, tb, alpha, beta);
                char what[128];
                snprintf(what, sizeof what, "matmul ta=%d tb=%d alpha=%g beta=%g", ta, tb, alpha, beta);
                ok &= bt_close(what, got, want, (size_t)m * n, 1e-5, 1e-6);
                be->ops->free(be, da), be->ops->free(be, db), be->ops->free(be, dc);
            }
    /* The linear-layer convention of backend.h: y = x W^T, W [out, in]. */
    float x[2 * 3] = {1, 2, 3, 4, 5, 6}, w[2 * 3] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, y[4];
    float *dx = bt_upload(be, x, 6), *dw = bt_upload(be, w, 6), *dy = bt_upload(be, NULL, 4);
    be->ops->matmul(be, FT_GEMM_F32, dy, dx, dw, 2, 2, 3, false, true, 1.0f, 0.0f);
    bt_download(be, y, dy, 4);
    assert_true(y[0] == -2.0f && y[1] == 3.0f && y[2] == -2.0f && y[3] == 7.5f);
    /* k = 0: c = beta c. */
    be->ops->matmul(be, FT_GEMM_F32, dy, dx, dw, 2, 2, 0, false, true, 1.0f, 2.0f);
    bt_download(be, y, dy, 4);
    assert_true(y[0] == -4.0f && y[3] == 15.0f);
    be->ops->free(be, dx), be->ops->free(be, dw), be->ops->free(be, dy);
    free(a), free(b), free(c0), free(got), free(want);
    ft_backend_destroy(be);
    assert_true(ok);
}

static void test_add_scale(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(6);
    const size_t n = 100001;
    float *x = malloc(n * 4), *y = malloc(n * 4), *got = malloc(n * 4);
    bt_fill_uniform(x, n, &r, -2, 2);
    bt_fill_uniform(y, n, &r, -2, 2);
    float *dx = bt_upload(be, x, n), *dy = bt_upload(be, y, n);
    be->ops->add(be, dy, dx, n);
    be->ops->scale(be, dy, -0.375f, n);
    bt_download(be, got, dy, n);
    for (size_t i = 0; i < n; i++)
        assert_true(got[i] == (y[i] + x[i]) * -0.375f);
    be->ops->free(be, dx), be->ops->free(be, dy);
    free(x), free(y), free(got);
    ft_backend_destroy(be);
}

static void test_sum_squares(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(7);
    const size_t sizes[] = {0, 1, 1000, 3000017};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        size_t n = sizes[t];
        float *x = malloc((n ? n : 1) * 4);
        bt_fill_uniform(x, n, &r, -3, 3);
        double want = 0.0;
        for (size_t i = 0; i < n; i++)
            want += (double)x[i] * x[i];
        float *dx = bt_upload(be, x, n);
        int saved = omp_get_max_threads();
        omp_set_num_threads(1);
        double one = be->ops->sum_squares(be, dx, n);
        omp_set_num_threads(3);
        double three = be->ops->sum_squares(be, dx, n);
        omp_set_num_threads(saved);
        /* fp64 accumulation: relative error ~1e-15, independent of thread count. */
        assert_true(fabs(one - want) <= 1e-12 * want);
        assert_true(one == three);
        be->ops->free(be, dx);
        free(x);
    }
    /* 2^24 + 1 + 1 is exact in fp64 but rounds back to 2^24 in fp32. */
    float big[3] = {4096.0f, 1.0f, 1.0f};
    float *db = bt_upload(be, big, 3);
    assert_true(be->ops->sum_squares(be, db, 3) == 16777218.0);
    /* sum_squares_each: every buffer's sum_squares, bitwise, empty ones included */
    const size_t ns[3] = {3, 0, 3000017};
    float *xs = malloc(ns[2] * 4);
    bt_fill_uniform(xs, ns[2], &r, -3, 3);
    float *dxs = bt_upload(be, xs, ns[2]);
    const float *bufs[3] = {db, db, dxs};
    double each[3];
    be->ops->sum_squares_each(be, bufs, ns, 3, each);
    assert_true(each[0] == 16777218.0 && each[1] == 0.0);
    assert_true(each[2] == be->ops->sum_squares(be, dxs, ns[2]));
    be->ops->free(be, dxs);
    free(xs);
    be->ops->free(be, db);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_all_transpositions),
        cmocka_unit_test(test_add_scale),
        cmocka_unit_test(test_sum_squares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
