/* The dropout op (backend.h) on the CPU backend:
 *  - an element is kept iff util/rng.h's ft_rng_u64(seed, row0 + i, j) has top 32 bits
 *    >= round(p 2^32) (the documented rule, computed here apart from the op's header);
 *    kept values are exactly x * (float)(1 / (1 - p)), dropped ones exactly 0;
 *  - the keep rate is 1 - p within 5 binomial standard deviations, for p = 0.1, 0.5, 0.9;
 *  - rows split over two calls (row0 advanced) give the bits of one call, and so do
 *    1 and 3 threads: what makes N ranks' masks those of 1 rank;
 *  - another seed gives another mask; p = 0 is the identity;
 *  - overwrite in place (y = x), accumulate (y += drop(x), one fp32 sum), and bf16
 *    storage (each output rounded once from the fp32 result). */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend_test_util.h"
#include "util/bf16.h"
#include "util/rng.h"

static bool reference_keep(double p, uint64_t seed, uint64_t row, uint64_t col)
{
    const uint64_t threshold = (uint64_t)llround(p * 4294967296.0);
    return (ft_rng_u64(seed, row, col) >> 32) >= threshold;
}

static float *dropped(ft_backend *be, const float *x, int rows, int cols, ft_dropout_mask m)
{
    const size_t n = (size_t)rows * cols;
    float *d_x = bt_upload(be, x, n), *d_y = bt_upload(be, NULL, n);
    be->ops->dropout(be, FT_DTYPE_F32, d_y, d_x, rows, cols, m, false);
    float *y = malloc(n * sizeof(float));
    bt_download(be, y, d_y, n);
    be->ops->free(be, d_x);
    be->ops->free(be, d_y);
    return y;
}

static void check_rule_and_rate(double p)
{
    ft_backend *be = bt_backend_create();
    const int rows = 256, cols = 1000;
    const size_t n = (size_t)rows * cols;
    const uint64_t seed = 0x5eed + (uint64_t)(p * 100), row0 = 123457;
    bt_rng rng = bt_rng_make(7);
    float *x = malloc(n * sizeof(float));
    bt_fill_uniform(x, n, &rng, 0.5f, 2.0f); /* nonzero: a kept value is never 0 */
    const ft_dropout_mask m = ft_dropout_mask_make(p, seed, row0);
    float *y = dropped(be, x, rows, cols, m);
    const float scale = (float)(1.0 / (1.0 - p));
    size_t kept = 0, wrong = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            const size_t e = (size_t)i * cols + j;
            const bool keep = reference_keep(p, seed, row0 + (uint64_t)i, (uint64_t)j);
            kept += keep;
            wrong += keep ? y[e] != x[e] * scale : y[e] != 0.0f;
        }
    if (wrong)
        fail_msg("p %g: %zu of %zu elements break the rule", p, wrong, n);
    const double rate = (double)kept / (double)n, sd = sqrt(p * (1 - p) / (double)n);
    if (fabs(rate - (1 - p)) > 5 * sd)
        fail_msg("p %g: keep rate %.5f, expected %.5f +- %.5f", p, rate, 1 - p, 5 * sd);
    /* columns differ between rows: not one mask repeated */
    size_t same = 0;
    for (int j = 0; j < cols; j++)
        same += (y[j] == 0.0f) == (y[cols + j] == 0.0f);
    assert_true(same < (size_t)cols);
    free(x);
    free(y);
    ft_backend_destroy(be);
}

static void test_rule_and_rate(void **state)
{
    (void)state;
    check_rule_and_rate(0.1);
    check_rule_and_rate(0.5);
    check_rule_and_rate(0.9);
}

/* The bits do not depend on how the rows are split or on the threads. */
static void test_split_and_threads(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const int rows = 300, cols = 257, cut = 111; /* rows x cols above the parallel minimum */
    const size_t n = (size_t)rows * cols;
    bt_rng rng = bt_rng_make(8);
    float *x = malloc(n * sizeof(float));
    bt_fill_uniform(x, n, &rng, -1.0f, 1.0f);
    const ft_dropout_mask m = ft_dropout_mask_make(0.3, 99, (uint64_t)1 << 40);
    float *whole = dropped(be, x, rows, cols, m);

    ft_dropout_mask first = m, second = m;
    second.row0 = m.row0 + cut;
    float *a = dropped(be, x, cut, cols, first);
    float *b = dropped(be, x + (size_t)cut * cols, rows - cut, cols, second);
    assert_memory_equal(whole, a, (size_t)cut * cols * sizeof(float));
    assert_memory_equal(whole + (size_t)cut * cols, b, (size_t)(rows - cut) * cols * sizeof(float));

    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    float *one = dropped(be, x, rows, cols, m);
    omp_set_num_threads(3);
    float *three = dropped(be, x, rows, cols, m);
    omp_set_num_threads(threads);
    assert_memory_equal(whole, one, n * sizeof(float));
    assert_memory_equal(whole, three, n * sizeof(float));

    /* another seed: another mask (about 2 p (1 - p) of the elements differ) */
    ft_dropout_mask other = m;
    other.seed++;
    float *o = dropped(be, x, rows, cols, other);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (o[i] == 0.0f) != (whole[i] == 0.0f);
    assert_true(differ > n / 3 && differ < n / 2);

    /* p = 0 keeps everything, unscaled */
    float *id = dropped(be, x, rows, cols, ft_dropout_mask_make(0.0, 99, 0));
    assert_memory_equal(id, x, n * sizeof(float));
    free(x), free(whole), free(a), free(b), free(one), free(three), free(o), free(id);
    ft_backend_destroy(be);
}

/* In place, accumulating, and in bf16: each against the fp32 rule. */
static void test_modes_and_bf16(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const int rows = 37, cols = 129;
    const size_t n = (size_t)rows * cols;
    bt_rng rng = bt_rng_make(9);
    float *x = malloc(n * sizeof(float)), *y0 = malloc(n * sizeof(float));
    bt_fill_uniform(x, n, &rng, -3.0f, 3.0f);
    bt_fill_uniform(y0, n, &rng, -3.0f, 3.0f);
    const double p = 0.25;
    const ft_dropout_mask m = ft_dropout_mask_make(p, 4242, 77);
    float *want = dropped(be, x, rows, cols, m);

    /* overwrite in place */
    float *d = bt_upload(be, x, n), *got = malloc(n * sizeof(float));
    be->ops->dropout(be, FT_DTYPE_F32, d, d, rows, cols, m, false);
    bt_download(be, got, d, n);
    assert_memory_equal(got, want, n * sizeof(float));
    /* accumulate: y0 + drop(x), one fp32 addition */
    float *dx = bt_upload(be, x, n), *dy = bt_upload(be, y0, n);
    be->ops->dropout(be, FT_DTYPE_F32, dy, dx, rows, cols, m, true);
    bt_download(be, got, dy, n);
    for (size_t i = 0; i < n; i++) {
        const float sum = y0[i] + want[i];
        if (got[i] != sum)
            fail_msg("accumulate: element %zu is %.9g, expected %.9g", i, got[i], sum);
    }

    /* bf16: the fp32 result of the widened input, rounded once */
    uint16_t *xh = malloc(n * 2), *yh = malloc(n * 2), *gh = malloc(n * 2);
    float *xw = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        xh[i] = ft_f32_to_bf16(x[i]);
        yh[i] = ft_f32_to_bf16(y0[i]);
        xw[i] = ft_bf16_to_f32(xh[i]);
    }
    float *ww = dropped(be, xw, rows, cols, m);
    void *bx = be->ops->alloc(be, n * 2), *by = be->ops->alloc(be, n * 2);
    be->ops->upload(be, bx, xh, n * 2);
    be->ops->dropout(be, FT_DTYPE_BF16, by, bx, rows, cols, m, false);
    be->ops->download(be, gh, by, n * 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(gh[i], ft_f32_to_bf16(ww[i]));
    be->ops->upload(be, by, yh, n * 2);
    be->ops->dropout(be, FT_DTYPE_BF16, by, bx, rows, cols, m, true);
    be->ops->download(be, gh, by, n * 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(gh[i], ft_f32_to_bf16(ft_bf16_to_f32(yh[i]) + ww[i]));

    be->ops->free(be, d), be->ops->free(be, dx), be->ops->free(be, dy);
    be->ops->free(be, bx), be->ops->free(be, by);
    free(x), free(y0), free(want), free(got), free(xh), free(yh), free(gh), free(xw), free(ww);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_and_rate),
        cmocka_unit_test(test_split_and_threads),
        cmocka_unit_test(test_modes_and_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
