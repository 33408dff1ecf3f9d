/* GELU, both kinds (erf "gelu", tanh "gelu_new"): the forward against the double
 * reference (ref_gelu, HF's formulas) and the backward against central finite
 * differences of that reference, element by element (gelu is elementwise, so
 * dx_i = dout_i * (g(x_i + h) - g(x_i - h)) / 2h), both within 1e-6 max|ref| + 1e-7;
 * the far negative tail element by element, relative to itself (no cancellation);
 * saturation far out. Also: dx may be dout's buffer, and the multi-threaded path
 * gives the same bits as one thread. */
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
#include "ref_ops.h"

static void check_gelu(ft_gelu_kind kind, size_t n, int threads)
{
    const char *name = kind == FT_GELU_TANH ? "tanh" : "erf";
    char what[64];
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(n * 3 + (uint64_t)kind);
    float *x = malloc(n * 4), *dout = malloc(n * 4), *got = malloc(n * 4);
    bt_fill_uniform(x, n, &rng, -6, 6); /* both tails and the curved middle */
    x[0] = 0.0f;
    bt_fill_uniform(dout, n, &rng, -1, 1);
    double *want = malloc(n * 8), *gx = malloc(n * 8);
    const double h = 1e-4;
    for (size_t i = 0; i < n; i++) {
        want[i] = ref_gelu(kind, x[i]);
        gx[i] = dout[i] * (ref_gelu(kind, x[i] + h) - ref_gelu(kind, x[i] - h)) / (2 * h);
    }
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    float *d_x = bt_upload(be, x, n), *d_dout = bt_upload(be, dout, n);
    float *d_y = bt_upload(be, NULL, n), *d_dx = bt_upload(be, NULL, n);
    be->ops->gelu_fwd(be, FT_DTYPE_F32, kind, d_y, d_x, n);
    bt_download(be, got, d_y, n);
    snprintf(what, sizeof what, "gelu %s forward", name);
    assert_true(bt_close(what, got, want, n, 1e-6, 1e-7));
    if (n > 100) { /* the other kind's formula is far outside that tolerance */
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(got[i] - ref_gelu(kind == FT_GELU_ERF ? FT_GELU_TANH
                                                                           : FT_GELU_ERF,
                                                       x[i])));
        assert_true(worst > 1e-4);
    }

    be->ops->gelu_bwd(be, FT_DTYPE_F32, kind, d_dx, d_dout, d_x, n);
    float *dx = malloc(n * 4);
    bt_download(be, dx, d_dx, n);
    snprintf(what, sizeof what, "gelu %s backward (FD)", name);
    assert_true(bt_close(what, dx, gx, n, 1e-6, 1e-7));

    /* in place: dx written over dout */
    be->ops->gelu_bwd(be, FT_DTYPE_F32, kind, d_dout, d_dout, d_x, n);
    bt_download(be, got, d_dout, n);
    omp_set_num_threads(saved);
    assert_memory_equal(got, dx, n * 4);

    if (threads > 1) { /* one thread: the same bits */
        omp_set_num_threads(1);
        float *d_y1 = bt_upload(be, NULL, n);
        be->ops->gelu_fwd(be, FT_DTYPE_F32, kind, d_y1, d_x, n);
        float *y1 = malloc(n * 4), *y2 = malloc(n * 4);
        bt_download(be, y1, d_y1, n), bt_download(be, y2, d_y, n);
        omp_set_num_threads(saved);
        assert_memory_equal(y1, y2, n * 4);
        free(y1), free(y2);
        be->ops->free(be, d_y1);
    }
    void *bufs[] = {d_x, d_dout, d_y, d_dx};
    for (int i = 0; i < 4; i++)
        be->ops->free(be, bufs[i]);
    free(x), free(dout), free(got), free(dx), free(want), free(gx);
    ft_backend_destroy(be);
}

static void test_gelu_erf(void **state)
{
    (void)state;
    check_gelu(FT_GELU_ERF, 1, 1);
    check_gelu(FT_GELU_ERF, 1001, 1);
}

static void test_gelu_tanh(void **state)
{
    (void)state;
    check_gelu(FT_GELU_TANH, 1, 1);
    check_gelu(FT_GELU_TANH, 1001, 1);
}

/* Above FT_CPU_PAR_MIN elements: the threaded loops. */
static void test_gelu_parallel_path(void **state)
{
    (void)state;
    check_gelu(FT_GELU_ERF, 70001, 2);
    check_gelu(FT_GELU_TANH, 70001, 2);
}

/* The negative tail, where gelu -> 0 and 1 + erf or 1 + tanh would cancel: each
 * element within 2e-5 of itself. That is the input's own conditioning (d ln gelu /
 * d ln x ~ x^2 / 2 ~ 32 at x = -8: one fp32 rounding of x moves gelu by ~4e-6). */
static void test_gelu_tail_relative(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const size_t n = 7001;
    float *x = malloc(n * 4), *y = malloc(n * 4), *d = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = -8.0f + 7.0f * (float)i / (float)(n - 1); /* [-8, -1] */
    float *d_x = bt_upload(be, x, n), *d_y = bt_upload(be, NULL, n), *d_d = bt_upload(be, NULL, n);
    for (int kind = FT_GELU_ERF; kind <= FT_GELU_TANH; kind++) {
        be->ops->gelu_fwd(be, FT_DTYPE_F32, (ft_gelu_kind)kind, d_y, d_x, n);
        bt_download(be, y, d_y, n);
        double worst = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            double want = ref_gelu((ft_gelu_kind)kind, x[i]);
            double rel = fabs(y[i] - want) / fabs(want);
            if (rel > worst)
                worst = rel, at = i;
        }
        if (worst > 2e-5)
            print_error("gelu %s tail: relative error %.3g at x = %g\n",
                        kind == FT_GELU_TANH ? "tanh" : "erf", worst, x[at]);
        assert_true(worst <= 2e-5);
    }
    be->ops->free(be, d_x), be->ops->free(be, d_y), be->ops->free(be, d_d);
    free(x), free(y), free(d);
    ft_backend_destroy(be);
}

/* Far in the tails gelu is 0 and x, gelu' 0 and 1, exactly in fp32 (no NaN from
 * x^3 or exp underflow). */
static void test_gelu_saturates(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const float x[4] = {-30.0f, 30.0f, -1e4f, 1e4f}, dout[4] = {1, 1, 1, 1};
    const float want_y[4] = {0.0f, 30.0f, 0.0f, 1e4f}, want_d[4] = {0, 1, 0, 1};
    float *d_x = bt_upload(be, x, 4), *d_y = bt_upload(be, NULL, 4), *d_d = bt_upload(be, dout, 4);
    for (int kind = FT_GELU_ERF; kind <= FT_GELU_TANH; kind++) {
        float y[4], d[4];
        be->ops->gelu_fwd(be, FT_DTYPE_F32, (ft_gelu_kind)kind, d_y, d_x, 4);
        be->ops->upload(be, d_d, dout, sizeof dout);
        be->ops->gelu_bwd(be, FT_DTYPE_F32, (ft_gelu_kind)kind, d_d, d_d, d_x, 4);
        bt_download(be, y, d_y, 4), bt_download(be, d, d_d, 4);
        for (int i = 0; i < 4; i++) {
            assert_true(y[i] == want_y[i]);
            assert_true(d[i] == want_d[i]);
        }
    }
    be->ops->free(be, d_x), be->ops->free(be, d_y), be->ops->free(be, d_d);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_erf),
        cmocka_unit_test(test_gelu_tanh),
        cmocka_unit_test(test_gelu_parallel_path),
        cmocka_unit_test(test_gelu_tail_relative),
        cmocka_unit_test(test_gelu_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
