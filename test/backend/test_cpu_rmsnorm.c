/* RMSNorm: forward against the double reference (|err| <= 1e-5 max|ref| + 1e-6),
 * rstd exact to fp32 rounding, backward against central finite differences of
 * L = sum r o y (|err| <= 1e-4 max|g| + 1e-6), and the accumulate semantics of
 * dx and dw. */
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

typedef struct rms_ctx {
    int rows, dim;
    double eps, *x, *w, *r, *y;
} rms_ctx;

static double rms_objective(void *p)
{
    rms_ctx *c = p;
    ref_rmsnorm_fwd(c->y, c->x, c->w, c->rows, c->dim, c->eps);
    return bt_dot(c->r, c->y, (size_t)c->rows * c->dim);
}

static void check_rmsnorm(int rows, int dim, int threads)
{
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make((uint64_t)rows * 1000 + dim);
    size_t n = (size_t)rows * dim;
    const float eps = 1e-5f;
    float *x = malloc(n * 4), *w = malloc(dim * 4), *r = malloc(n * 4), *y = malloc(n * 4);
    float *rstd = malloc(rows * 4), *dx = malloc(n * 4), *dw = malloc(dim * 4);
    float *dx0 = malloc(n * 4), *dw0 = malloc(dim * 4);
    bt_fill_uniform(x, n, &rng, -2, 2);
    bt_fill_uniform(w, dim, &rng, 0.5f, 1.5f);
    bt_fill_uniform(r, n, &rng, -1, 1);
    bt_fill_uniform(dx0, n, &rng, -1, 1); /* existing gradients: the op accumulates */
    bt_fill_uniform(dw0, dim, &rng, -1, 1);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);

    float *d_x = bt_upload(be, x, n), *d_w = bt_upload(be, w, dim), *d_r = bt_upload(be, r, n);
    float *d_y = bt_upload(be, NULL, n), *d_rstd = bt_upload(be, NULL, rows);
    float *d_dx = bt_upload(be, dx0, n), *d_dw = bt_upload(be, dw0, dim);
    be->ops->rmsnorm_fwd(be, FT_DTYPE_F32, d_y, d_rstd, d_x, d_w, rows, dim, eps);
    be->ops->rmsnorm_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, d_dx, d_dx, d_dw, d_r, d_x, d_w, d_rstd,
                         rows, dim);
    bt_download(be, y, d_y, n), bt_download(be, rstd, d_rstd, rows);
    bt_download(be, dx, d_dx, n), bt_download(be, dw, d_dw, dim);
    omp_set_num_threads(saved);

    rms_ctx c = {rows, dim, eps, bt_to_double(x, n), bt_to_double(w, dim), bt_to_double(r, n),
                 malloc(n * 8)};
    double *want_y = malloc(n * 8), *want_rstd = malloc(rows * 8);
    ref_rmsnorm_fwd(want_y, c.x, c.w, rows, dim, c.eps);
    for (int i = 0; i < rows; i++) {
        double ss = 0;
        for (int j = 0; j < dim; j++)
            ss += c.x[(size_t)i * dim + j] * c.x[(size_t)i * dim + j];
        want_rstd[i] = 1.0 / sqrt(ss / dim + c.eps);
    }
    double *gx = malloc(n * 8), *gw = malloc(dim * 8);
    /* Rows are normalised independently: FD of dx one row at a time. */
    for (int i = 0; i < rows; i++) {
        size_t off = (size_t)i * dim;
        rms_ctx one = {1, dim, c.eps, c.x + off, c.w, c.r + off, c.y + off};
        bt_fd_gradient(gx + off, one.x, dim, 1e-4, rms_objective, &one);
    }
    bt_fd_gradient(gw, c.w, dim, 1e-4, rms_objective, &c);
    for (size_t i = 0; i < n; i++) /* compare the increments */
        dx[i] -= dx0[i];
    for (int j = 0; j < dim; j++)
        dw[j] -= dw0[j];
    assert_true(bt_close("rmsnorm y", y, want_y, n, 1e-5, 1e-6));
    assert_true(bt_close("rmsnorm rstd", rstd, want_rstd, rows, 1e-5, 0));
    assert_true(bt_close("rmsnorm dx (FD)", dx, gx, n, 1e-4, 1e-6));
    assert_true(bt_close("rmsnorm dw (FD)", dw, gw, dim, 1e-4, 1e-6));

    void *bufs[] = {d_x, d_w, d_r, d_y, d_rstd, d_dx, d_dw};
    for (int i = 0; i < 7; i++)
        be->ops->free(be, bufs[i]);
    free(x), free(w), free(r), free(y), free(rstd), free(dx), free(dw), free(dx0), free(dw0);
    free(c.x), free(c.w), free(c.r), free(c.y), free(want_y), free(want_rstd), free(gx), free(gw);
    ft_backend_destroy(be);
}

static void test_rmsnorm_small(void **state)
{
    (void)state;
    check_rmsnorm(5, 16, 1);
}

/* More rows than one column block, dim not a multiple of the 64-wide dw blocks,
 * and enough work to take the multi-threaded path. */
static void test_rmsnorm_parallel_path(void **state)
{
    (void)state;
    check_rmsnorm(300, 131, 2);
}

/* Qwen3's q/k norm: the op on a [tokens, heads * head_dim] tensor viewed as
 * tokens * heads rows of head_dim, with one [head_dim] weight (13 tokens x 4
 * heads of 24; 600 x 8 heads of 128 for the threaded path). */
static void test_rmsnorm_per_head(void **state)
{
    (void)state;
    check_rmsnorm(13 * 4, 24, 1);
    check_rmsnorm(600 * 8, 128, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_small),
        cmocka_unit_test(test_rmsnorm_parallel_path),
        cmocka_unit_test(test_rmsnorm_per_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
