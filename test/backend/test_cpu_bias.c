/* Linear-layer bias (Qwen2's q/k/v): bias_add against the double reference
 * y + b (exact in fp32: one add per element), bias_grad against central finite
 * differences of L = sum r o (y + b) in b (|err| <= 1e-4 max|g| + 1e-6), the
 * accumulate semantics of both, and bit-identical gradients for 1..4 threads. */
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

typedef struct bias_ctx {
    int rows, dim;
    double *y, *b, *r;
} bias_ctx;

/* L = sum_rc r_rc (y_rc + b_c), in double. */
static double bias_objective(void *p)
{
    bias_ctx *c = p;
    double sum = 0.0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->dim; j++)
            sum += c->r[(size_t)i * c->dim + j] * (c->y[(size_t)i * c->dim + j] + c->b[j]);
    return sum;
}

static void check_bias(int rows, int dim)
{
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make((uint64_t)rows * 7919 + dim);
    const size_t n = (size_t)rows * dim;
    float *y = malloc(n * 4), *b = malloc(dim * 4), *r = malloc(n * 4), *got = malloc(n * 4);
    float *db0 = malloc(dim * 4);
    bt_fill_uniform(y, n, &rng, -2, 2);
    bt_fill_uniform(b, dim, &rng, -1, 1);
    bt_fill_uniform(r, n, &rng, -1, 1);
    bt_fill_uniform(db0, dim, &rng, -1, 1); /* bias_grad accumulates onto this */

    float *d_y = bt_upload(be, y, n), *d_b = bt_upload(be, b, dim), *d_r = bt_upload(be, r, n);
    float *d_db = bt_upload(be, db0, dim);
    be->ops->bias_add(be, FT_DTYPE_F32, FT_DTYPE_F32, d_y, d_b, rows, dim);
    be->ops->bias_grad(be, FT_DTYPE_F32, FT_DTYPE_F32, d_db, d_r, rows, dim);

    double *want = malloc(n * 8);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < dim; j++)
            want[(size_t)i * dim + j] = (double)y[(size_t)i * dim + j] + b[j];
    bt_download(be, got, d_y, n);
    assert_true(bt_close("bias_add", got, want, n, 1e-7, 0));

    bias_ctx c = { rows, dim, bt_to_double(y, n), bt_to_double(b, dim), bt_to_double(r, n) };
    double *g = malloc(dim * 8);
    bt_fd_gradient(g, c.b, dim, 1e-3, bias_objective, &c);
    for (int j = 0; j < dim; j++)
        g[j] += db0[j];
    bt_download(be, got, d_db, dim);
    assert_true(bt_close("bias_grad (FD, accumulated)", got, g, dim, 1e-4, 1e-6));

    void *bufs[] = { d_y, d_b, d_r, d_db };
    for (int i = 0; i < 4; i++)
        be->ops->free(be, bufs[i]);
    free(y), free(b), free(r), free(got), free(db0), free(want), free(g);
    free(c.y), free(c.b), free(c.r);
    ft_backend_destroy(be);
}

static void test_bias_small(void **state)
{
    (void)state;
    check_bias(5, 16);
    check_bias(1, 3);
}

/* dim not a multiple of the 64-column tasks, enough work for several threads. */
static void test_bias_parallel_path(void **state)
{
    (void)state;
    check_bias(700, 200);
}

static void test_bias_grad_deterministic(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const int rows = 900, dim = 333;
    bt_rng rng = bt_rng_make(5);
    float *dy = malloc((size_t)rows * dim * 4), *one = malloc(dim * 4), *many = malloc(dim * 4);
    bt_fill_uniform(dy, (size_t)rows * dim, &rng, -1, 1);
    float *d_dy = bt_upload(be, dy, (size_t)rows * dim);
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 4; threads++) {
        omp_set_num_threads(threads);
        float *d_db = bt_upload(be, NULL, dim);
        be->ops->bias_grad(be, FT_DTYPE_F32, FT_DTYPE_F32, d_db, d_dy, rows, dim);
        bt_download(be, threads == 1 ? one : many, d_db, dim);
        be->ops->free(be, d_db);
        if (threads > 1)
            assert_memory_equal(one, many, dim * sizeof(float));
    }
    omp_set_num_threads(saved);
    be->ops->free(be, d_dy);
    free(dy), free(one), free(many);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_small),
        cmocka_unit_test(test_bias_parallel_path),
        cmocka_unit_test(test_bias_grad_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
