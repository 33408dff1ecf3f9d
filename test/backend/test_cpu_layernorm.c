/* LayerNorm with bias (GPT-NeoX, GPT-J): forward against the double reference
 * (|err| <= 1e-5 max|ref| + 1e-6), mean and rstd to fp32 rounding, the backward
 * against central finite differences of L = sum r o y (|err| <= 1e-4 max|g| + 1e-6)
 * for dx, dw and db, the accumulate semantics of all three, and dw/db identical
 * bit for bit whatever the number of threads. */
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

typedef struct ln_ctx {
    int rows, dim;
    double eps, *x, *w, *b, *r, *y;
} ln_ctx;

static double ln_objective(void *p)
{
    ln_ctx *c = p;
    ref_layernorm_fwd(c->y, NULL, NULL, c->x, c->w, c->b, c->rows, c->dim, c->eps);
    return bt_dot(c->r, c->y, (size_t)c->rows * c->dim);
}

typedef struct ln_out {
    float *y, *mean, *rstd, *dx, *dw, *db; /* host copies, malloc'd */
} ln_out;

/* Runs forward then backward (onto dx0, dw0, db0) with `threads` OpenMP threads. */
static ln_out run_layernorm(const float *x, const float *w, const float *b, const float *r,
                            const float *dx0, const float *dw0, const float *db0, int rows,
                            int dim, float eps, int threads)
{
    ft_backend *be = bt_backend_create();
    size_t n = (size_t)rows * dim;
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    float *d_x = bt_upload(be, x, n), *d_w = bt_upload(be, w, dim), *d_b = bt_upload(be, b, dim);
    float *d_r = bt_upload(be, r, n), *d_y = bt_upload(be, NULL, n);
    float *d_mean = bt_upload(be, NULL, rows), *d_rstd = bt_upload(be, NULL, rows);
    float *d_dx = bt_upload(be, dx0, n), *d_dw = bt_upload(be, dw0, dim);
    float *d_db = bt_upload(be, db0, dim);
    be->ops->layernorm_fwd(be, FT_DTYPE_F32, d_y, d_mean, d_rstd, d_x, d_w, d_b, rows, dim, eps);
    be->ops->layernorm_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, d_dx, d_dx, d_dw, d_db, d_r, d_x, d_w,
                           d_mean, d_rstd, rows, dim);
    omp_set_num_threads(saved);
    ln_out o = {malloc(n * 4), malloc(rows * 4), malloc(rows * 4), malloc(n * 4), malloc(dim * 4),
                malloc(dim * 4)};
    bt_download(be, o.y, d_y, n), bt_download(be, o.mean, d_mean, rows);
    bt_download(be, o.rstd, d_rstd, rows), bt_download(be, o.dx, d_dx, n);
    bt_download(be, o.dw, d_dw, dim), bt_download(be, o.db, d_db, dim);
    void *bufs[] = {d_x, d_w, d_b, d_r, d_y, d_mean, d_rstd, d_dx, d_dw, d_db};
    for (int i = 0; i < 10; i++)
        be->ops->free(be, bufs[i]);
    ft_backend_destroy(be);
    return o;
}

static void ln_out_free(ln_out o)
{
    free(o.y), free(o.mean), free(o.rstd), free(o.dx), free(o.dw), free(o.db);
}

/* offset shifts every x: LayerNorm must not lose the variance to a large mean. */
static void check_layernorm(int rows, int dim, float offset, double y_rel, int threads)
{
    bt_rng rng = bt_rng_make((uint64_t)rows * 1000 + dim);
    size_t n = (size_t)rows * dim;
    const float eps = 1e-5f;
    float *x = malloc(n * 4), *w = malloc(dim * 4), *b = malloc(dim * 4), *r = malloc(n * 4);
    float *dx0 = malloc(n * 4), *dw0 = malloc(dim * 4), *db0 = malloc(dim * 4);
    bt_fill_uniform(x, n, &rng, -2, 2);
    for (size_t i = 0; i < n; i++)
        x[i] += offset;
    bt_fill_uniform(w, dim, &rng, 0.5f, 1.5f);
    bt_fill_uniform(b, dim, &rng, -0.5f, 0.5f);
    bt_fill_uniform(r, n, &rng, -1, 1);
    bt_fill_uniform(dx0, n, &rng, -1, 1); /* existing gradients: the op accumulates */
    bt_fill_uniform(dw0, dim, &rng, -1, 1);
    bt_fill_uniform(db0, dim, &rng, -1, 1);
    ln_out o = run_layernorm(x, w, b, r, dx0, dw0, db0, rows, dim, eps, threads);

    ln_ctx c = {rows, dim, eps, bt_to_double(x, n), bt_to_double(w, dim), bt_to_double(b, dim),
                bt_to_double(r, n), malloc(n * 8)};
    double *want_y = malloc(n * 8), *want_mean = malloc(rows * 8), *want_rstd = malloc(rows * 8);
    ref_layernorm_fwd(want_y, want_mean, want_rstd, c.x, c.w, c.b, rows, dim, c.eps);
    double *gx = malloc(n * 8), *gw = malloc(dim * 8), *gb = malloc(dim * 8);
    /* Rows are normalised independently: FD of dx one row at a time. */
    for (int i = 0; i < rows; i++) {
        size_t off = (size_t)i * dim;
        ln_ctx one = {1, dim, c.eps, c.x + off, c.w, c.b, c.r + off, c.y + off};
        bt_fd_gradient(gx + off, one.x, dim, 1e-4, ln_objective, &one);
    }
    bt_fd_gradient(gw, c.w, dim, 1e-4, ln_objective, &c);
    bt_fd_gradient(gb, c.b, dim, 1e-4, ln_objective, &c);
    for (size_t i = 0; i < n; i++) /* compare the increments */
        o.dx[i] -= dx0[i];
    for (int j = 0; j < dim; j++) {
        o.dw[j] -= dw0[j];
        o.db[j] -= db0[j];
    }
    /* mean carries the offset: its fp32 rounding is relative to |mean| */
    assert_true(bt_close("layernorm y", o.y, want_y, n, y_rel, 1e-6));
    assert_true(bt_close("layernorm mean", o.mean, want_mean, rows, 1e-6, 1e-6));
    assert_true(bt_close("layernorm rstd", o.rstd, want_rstd, rows, 1e-5, 0));
    assert_true(bt_close("layernorm dx (FD)", o.dx, gx, n, 1e-4, 1e-6));
    assert_true(bt_close("layernorm dw (FD)", o.dw, gw, dim, 1e-4, 1e-6));
    assert_true(bt_close("layernorm db (FD)", o.db, gb, dim, 1e-4, 1e-6));

    /* dw and db sum rows in row order: the same bits with one thread */
    if (threads > 1) {
        ln_out one = run_layernorm(x, w, b, r, dx0, dw0, db0, rows, dim, eps, 1);
        for (int j = 0; j < dim; j++) {
            one.dw[j] -= dw0[j];
            one.db[j] -= db0[j];
        }
        assert_memory_equal(one.dw, o.dw, (size_t)dim * 4);
        assert_memory_equal(one.db, o.db, (size_t)dim * 4);
        ln_out_free(one);
    }

    ln_out_free(o);
    free(x), free(w), free(b), free(r), free(dx0), free(dw0), free(db0);
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y);
    free(want_y), free(want_mean), free(want_rstd), free(gx), free(gw), free(gb);
}

static void test_layernorm_small(void **state)
{
    (void)state;
    check_layernorm(5, 16, 0.0f, 1e-5, 1);
}

/* One row; dim not a multiple of the 64-wide dw/db column blocks. */
static void test_layernorm_one_row(void **state)
{
    (void)state;
    check_layernorm(1, 77, 0.0f, 1e-5, 1);
}

/* Enough work for the multi-threaded path (compared with one thread bit for bit). */
static void test_layernorm_parallel_path(void **state)
{
    (void)state;
    check_layernorm(300, 131, 0.0f, 1e-5, 2);
}

/* |mean| = 100 x the spread: x - mean then loses ~2^-24 * 100 of each value (y within
 * 4e-5 relative), while a one-pass E[x^2] - mean^2 variance would cancel 1e4 down to
 * ~1 and miss by ~10x that. */
static void test_layernorm_large_mean(void **state)
{
    (void)state;
    check_layernorm(9, 96, 100.0f, 4e-5, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_small),
        cmocka_unit_test(test_layernorm_one_row),
        cmocka_unit_test(test_layernorm_parallel_path),
        cmocka_unit_test(test_layernorm_large_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
