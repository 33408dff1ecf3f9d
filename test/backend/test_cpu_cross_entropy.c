/* Fused cross-entropy: row losses against a double logsumexp
 * (|err| <= 1e-5 max|ref| + 1e-6), dlogits against finite differences of
 * L = grad_scale * sum_r loss_r (|err| <= 1e-4 max|g| + 1e-7), zero-weight rows
 * (zero loss and gradient, target never read), and huge logits; dlogits written
 * elsewhere than in place are the in-place ones bitwise, as fp32 or rounded to bf16,
 * and leave the logits alone; bf16 logits give the bits of their fp32 widening. */
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
#include "util/bf16.h"
#include "ref_ops.h"

typedef struct ce_ctx {
    double *logits, *loss;
    const int32_t *targets;
    const float *weight;
    int rows, vocab;
    double grad_scale;
} ce_ctx;

static double ce_objective(void *p)
{
    ce_ctx *c = p;
    ref_cross_entropy_loss(c->loss, c->logits, c->targets, c->weight, c->rows, c->vocab);
    double s = 0.0;
    for (int r = 0; r < c->rows; r++)
        s += c->loss[r];
    return c->grad_scale * s;
}

static void check_ce(int rows, int vocab, float offset, bool with_weight)
{
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make((uint64_t)rows * vocab);
    size_t n = (size_t)rows * vocab;
    const float grad_scale = 0.25f;
    float *logits = malloc(n * 4), *got = malloc(n * 4), *loss = malloc(rows * 4);
    float *weight = malloc(rows * 4);
    int32_t *targets = malloc(rows * 4);
    bt_fill_uniform(logits, n, &rng, offset - 4, offset + 4);
    for (int r = 0; r < rows; r++) {
        weight[r] = r % 3 == 1 ? 0.0f : (r % 3 == 2 ? 0.5f : 1.0f);
        /* zero-weight rows carry an invalid target: it must not be read */
        targets[r] = weight[r] == 0.0f ? -100 : bt_rng_int(&rng, vocab);
    }
    if (!with_weight)
        for (int r = 0; r < rows; r++)
            if (targets[r] < 0)
                targets[r] = bt_rng_int(&rng, vocab);
    float *d_logits = bt_upload(be, logits, n), *d_loss = bt_upload(be, NULL, rows);
    float *d_w = with_weight ? bt_upload(be, weight, rows) : NULL;
    int32_t *d_t = bt_upload_i32(be, targets, rows);
    be->ops->cross_entropy(be, d_logits, FT_DTYPE_F32, d_logits, FT_DTYPE_F32, d_loss, d_t, d_w,
                           rows, vocab, grad_scale);
    bt_download(be, got, d_logits, n);
    bt_download(be, loss, d_loss, rows);

    ce_ctx c = {bt_to_double(logits, n), malloc(rows * 8), targets, with_weight ? weight : NULL,
                rows, vocab, grad_scale};
    ce_objective(&c);
    assert_true(bt_close("cross-entropy loss", loss, c.loss, rows, 1e-5, 1e-6));
    /* loss_r depends on row r only: FD one row at a time (same differences). */
    double *fd = malloc(n * 8);
    for (int r = 0; r < rows; r++) {
        ce_ctx row = {c.logits + (size_t)r * vocab, c.loss + r, targets + r,
                      with_weight ? weight + r : NULL, 1, vocab, grad_scale};
        bt_fd_gradient(fd + (size_t)r * vocab, row.logits, vocab, 1e-3, ce_objective, &row);
    }
    assert_true(bt_close("cross-entropy dlogits (FD)", got, fd, n, 1e-4, 1e-7));
    for (int r = 0; r < rows && with_weight; r++)
        if (weight[r] == 0.0f) {
            assert_true(loss[r] == 0.0f);
            for (int j = 0; j < vocab; j++)
                assert_true(got[(size_t)r * vocab + j] == 0.0f);
        }
    be->ops->free(be, d_logits), be->ops->free(be, d_loss), be->ops->free(be, d_t);
    be->ops->free(be, d_w);
    free(logits), free(got), free(loss), free(weight), free(targets), free(fd);
    free(c.logits), free(c.loss);
    ft_backend_destroy(be);
}

/* Out of place, fp32 and bf16, against in place: the same bits (bf16: rounded once). */
static void test_ce_out_of_place(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const int rows = 5, vocab = 4099;
    const size_t n = (size_t)rows * vocab;
    bt_rng rng = bt_rng_make(77);
    float *logits = malloc(n * 4), *w = malloc(rows * 4);
    int32_t *t = malloc(rows * 4);
    bt_fill_uniform(logits, n, &rng, -5, 5);
    for (int r = 0; r < rows; r++) {
        w[r] = r == 3 ? 0.0f : 1.0f;
        t[r] = bt_rng_int(&rng, vocab);
    }
    float *a = bt_upload(be, logits, n), *b = bt_upload(be, logits, n);
    float *loss = bt_upload(be, NULL, rows), *out32 = bt_upload(be, NULL, n);
    float *dw = bt_upload(be, w, rows);
    int32_t *dt = bt_upload_i32(be, t, rows);
    uint16_t *out16 = be->ops->alloc(be, n * 2), *cast = be->ops->alloc(be, n * 2);
    be->ops->cross_entropy(be, a, FT_DTYPE_F32, out16, FT_DTYPE_BF16, loss, dt, dw, rows, vocab,
                           0.5f);
    be->ops->cross_entropy(be, a, FT_DTYPE_F32, out32, FT_DTYPE_F32, loss, dt, dw, rows, vocab,
                           0.5f);
    assert_memory_equal(a, logits, n * 4); /* untouched */
    be->ops->cross_entropy(be, b, FT_DTYPE_F32, b, FT_DTYPE_F32, loss, dt, dw, rows, vocab, 0.5f);
    assert_memory_equal(out32, b, n * 4);
    be->ops->f32_to_bf16(be, cast, b, n);
    assert_memory_equal(out16, cast, n * 2);
    be->ops->free(be, a), be->ops->free(be, b), be->ops->free(be, loss);
    be->ops->free(be, out32), be->ops->free(be, dw), be->ops->free(be, dt);
    be->ops->free(be, out16), be->ops->free(be, cast);
    free(logits), free(w), free(t);
    ft_backend_destroy(be);
}

/* bf16 logits (the bf16 recipe's head) are the fp32 op on their exact widening: losses
 * and dlogits bitwise, fp32 or bf16 dlogits, in place over the logits or elsewhere. */
static void test_ce_bf16_logits(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const int rows = 6, vocab = 4099;
    const size_t n = (size_t)rows * vocab;
    bt_rng rng = bt_rng_make(78);
    float *logits = malloc(n * 4), *w = malloc(rows * 4), *want_loss = malloc(rows * 4);
    float *got_loss = malloc(rows * 4), *got32 = malloc(n * 4);
    uint16_t *bits = malloc(n * 2), *got16 = malloc(n * 2), *want16 = malloc(n * 2);
    int32_t *t = malloc(rows * 4);
    bt_fill_uniform(logits, n, &rng, -6, 6);
    for (size_t i = 0; i < n; i++) { /* the logits bf16 holds exactly */
        bits[i] = ft_f32_to_bf16(logits[i]);
        logits[i] = ft_bf16_to_f32(bits[i]);
    }
    for (int r = 0; r < rows; r++) {
        w[r] = r == 2 ? 0.0f : 1.0f;
        t[r] = r == 2 ? -1 : bt_rng_int(&rng, vocab);
    }
    float *wide = bt_upload(be, logits, n), *loss = bt_upload(be, NULL, rows);
    float *dw = bt_upload(be, w, rows), *out32 = bt_upload(be, NULL, n);
    int32_t *dt = bt_upload_i32(be, t, rows);
    uint16_t *z16 = be->ops->alloc(be, n * 2), *out16 = be->ops->alloc(be, n * 2);
    memcpy(z16, bits, n * 2);
    /* the reference: fp32 logits, bf16 dlogits elsewhere, then fp32 dlogits in place */
    be->ops->cross_entropy(be, wide, FT_DTYPE_F32, out16, FT_DTYPE_BF16, loss, dt, dw, rows,
                           vocab, 0.5f);
    memcpy(want16, out16, n * 2);
    memcpy(want_loss, loss, rows * 4);
    be->ops->cross_entropy(be, wide, FT_DTYPE_F32, wide, FT_DTYPE_F32, loss, dt, dw, rows, vocab,
                           0.5f);
    /* bf16 logits, fp32 dlogits elsewhere (the logits left alone) */
    be->ops->cross_entropy(be, z16, FT_DTYPE_BF16, out32, FT_DTYPE_F32, loss, dt, dw, rows, vocab,
                           0.5f);
    memcpy(got32, out32, n * 4);
    assert_memory_equal(got32, wide, n * 4);
    assert_memory_equal(z16, bits, n * 2);
    /* bf16 logits, bf16 dlogits in place */
    be->ops->cross_entropy(be, z16, FT_DTYPE_BF16, z16, FT_DTYPE_BF16, loss, dt, dw, rows, vocab,
                           0.5f);
    memcpy(got16, z16, n * 2);
    memcpy(got_loss, loss, rows * 4);
    assert_memory_equal(got16, want16, n * 2);
    assert_memory_equal(got_loss, want_loss, rows * 4);
    be->ops->free(be, wide), be->ops->free(be, loss), be->ops->free(be, dw);
    be->ops->free(be, out32), be->ops->free(be, dt), be->ops->free(be, z16);
    be->ops->free(be, out16);
    free(logits), free(w), free(want_loss), free(got_loss), free(got32), free(bits);
    free(got16), free(want16), free(t);
    ft_backend_destroy(be);
}

static void test_ce_small(void **state)
{
    (void)state;
    check_ce(7, 33, 0.0f, true);
}

/* Logits near 1e4: exp would overflow without the max shift. */
static void test_ce_large_logits(void **state)
{
    (void)state;
    check_ce(4, 50, 1e4f, true);
}

static void test_ce_no_weight_parallel(void **state)
{
    (void)state;
    check_ce(12, 3001, -3.0f, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ce_small),
        cmocka_unit_test(test_ce_large_logits),
        cmocka_unit_test(test_ce_no_weight_parallel),
        cmocka_unit_test(test_ce_out_of_place),
        cmocka_unit_test(test_ce_bf16_logits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
