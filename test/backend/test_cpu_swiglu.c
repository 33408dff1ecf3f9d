/* SwiGLU: forward against the double reference (|err| <= 1e-5 max|ref| + 1e-6),
 * backward against finite differences of L = sum r o out
 * (|err| <= 1e-4 max|g| + 1e-6), overwrite semantics, large |gate| without NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend_test_util.h"
#include "ref_ops.h"

/* L = sum_i r_i out_i depends on gate_i and up_i only through out_i, so its
 * central difference in gate_i is r_i (out(g+h, u) - out(g-h, u)) / 2h: the
 * same FD as perturbing the whole vector, without recomputing n outputs. */
static double swiglu1(double g, double u)
{
    double out;
    ref_swiglu_fwd(&out, &g, &u, 1);
    return out;
}

static void check_swiglu(size_t n, float amp)
{
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(n);
    float *g = malloc(n * 4), *u = malloc(n * 4), *r = malloc(n * 4), *got = malloc(n * 4);
    bt_fill_uniform(g, n, &rng, -amp, amp);
    bt_fill_uniform(u, n, &rng, -2, 2);
    bt_fill_uniform(r, n, &rng, -1, 1);
    float *d_g = bt_upload(be, g, n), *d_u = bt_upload(be, u, n), *d_r = bt_upload(be, r, n);
    float *d_out = bt_upload(be, NULL, n);
    float *nan_fill = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        nan_fill[i] = NAN;
    float *d_dg = bt_upload(be, nan_fill, n), *d_du = bt_upload(be, nan_fill, n); /* overwritten */
    be->ops->swiglu_fwd(be, FT_DTYPE_F32, d_out, d_g, d_u, n);
    be->ops->swiglu_bwd(be, FT_DTYPE_F32, d_dg, d_du, d_r, d_g, d_u, n, NULL);

    double *want = malloc(n * 8), *fdg = malloc(n * 8), *fdu = malloc(n * 8);
    const double h = 1e-4;
    for (size_t i = 0; i < n; i++) {
        double gi = g[i], ui = u[i];
        want[i] = swiglu1(gi, ui);
        fdg[i] = r[i] * (swiglu1(gi + h, ui) - swiglu1(gi - h, ui)) / (2 * h);
        fdu[i] = r[i] * (swiglu1(gi, ui + h) - swiglu1(gi, ui - h)) / (2 * h);
    }
    bt_download(be, got, d_out, n);
    assert_true(bt_close("swiglu forward", got, want, n, 1e-5, 1e-6));
    bt_download(be, got, d_dg, n);
    assert_true(bt_close("swiglu dgate (FD)", got, fdg, n, 1e-4, 1e-6));
    bt_download(be, got, d_du, n);
    assert_true(bt_close("swiglu dup (FD)", got, fdu, n, 1e-4, 1e-6));
    { /* with out over dout's buffer: the forward's bits, and the same gradients */
        float *d_r2 = bt_upload(be, r, n), *d_dg2 = bt_upload(be, nan_fill, n);
        float *d_du2 = bt_upload(be, nan_fill, n), *want_bits = malloc(n * 4);
        be->ops->swiglu_bwd(be, FT_DTYPE_F32, d_dg2, d_du2, d_r2, d_g, d_u, n, d_r2);
        const float *pairs[3][2] = { { d_r2, d_out }, { d_dg2, d_dg }, { d_du2, d_du } };
        for (int k = 0; k < 3; k++) {
            bt_download(be, got, pairs[k][0], n);
            bt_download(be, want_bits, pairs[k][1], n);
            assert_memory_equal(got, want_bits, n * 4);
        }
        void *more[] = { d_r2, d_dg2, d_du2 };
        for (int k = 0; k < 3; k++)
            be->ops->free(be, more[k]);
        free(want_bits);
    }

    void *bufs[] = {d_g, d_u, d_r, d_out, d_dg, d_du};
    for (int i = 0; i < 6; i++)
        be->ops->free(be, bufs[i]);
    free(g), free(u), free(r), free(got), free(nan_fill), free(want), free(fdg), free(fdu);
    ft_backend_destroy(be);
}

static void test_swiglu_small(void **state)
{
    (void)state;
    check_swiglu(37, 4.0f);
}

static void test_swiglu_parallel_path(void **state)
{
    (void)state;
    check_swiglu(70001, 6.0f);
}

/* Far tails: silu(-100) = -100 e^-100 ~ 0, silu(100) = 100; no inf/NaN. */
static void test_swiglu_extremes(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    float g[4] = {-100.0f, 100.0f, -1e30f, 1e30f}, u[4] = {1, 1, 1, 1}, out[4], dg[4], du[4];
    float one[4] = {1, 1, 1, 1};
    float *d_g = bt_upload(be, g, 4), *d_u = bt_upload(be, u, 4), *d_o = bt_upload(be, NULL, 4);
    float *d_dg = bt_upload(be, NULL, 4), *d_du = bt_upload(be, NULL, 4), *d_1 = bt_upload(be, one, 4);
    be->ops->swiglu_fwd(be, FT_DTYPE_F32, d_o, d_g, d_u, 4);
    be->ops->swiglu_bwd(be, FT_DTYPE_F32, d_dg, d_du, d_1, d_g, d_u, 4, NULL);
    bt_download(be, out, d_o, 4), bt_download(be, dg, d_dg, 4), bt_download(be, du, d_du, 4);
    assert_true(fabsf(out[0]) < 1e-30f && out[1] == 100.0f);
    assert_true(fabsf(out[2]) < 1e-30f && out[3] == 1e30f);
    for (int i = 0; i < 4; i++)
        assert_true(isfinite(out[i]) && isfinite(dg[i]) && isfinite(du[i]));
    assert_true(fabsf(dg[0]) < 1e-30f && dg[1] == 1.0f);
    void *bufs[] = {d_g, d_u, d_o, d_dg, d_du, d_1};
    for (int i = 0; i < 6; i++)
        be->ops->free(be, bufs[i]);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swiglu_small),
        cmocka_unit_test(test_swiglu_parallel_path),
        cmocka_unit_test(test_swiglu_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
