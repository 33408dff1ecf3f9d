/* Rotary embedding: forward against the double reference with tables built from
 * fp32 angles (|err| <= 1e-5 max|ref| + 1e-6), inverse(forward(x)) == x to fp32
 * rounding, and the backward (the inverse rotation applied to dy) against finite
 * differences of L = sum r o rope(x) (|err| <= 1e-4 max|g| + 1e-6). */
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

#define THETA 10000.0
#define MAX_POS 300

/* cos/sin tables [MAX_POS, hd/2] as a model would build them. */
static void make_tables(float *cos_t, float *sin_t, int hd)
{
    int half = hd / 2;
    for (int p = 0; p < MAX_POS; p++)
        for (int i = 0; i < half; i++) {
            double angle = p * pow(THETA, -2.0 * i / hd);
            cos_t[p * half + i] = (float)cos(angle);
            sin_t[p * half + i] = (float)sin(angle);
        }
}

typedef struct rope_ctx {
    double *x, *y, *r;
    const int32_t *pos;
    int tokens, nh, hd;
} rope_ctx;

static double rope_objective(void *p)
{
    rope_ctx *c = p;
    size_t n = (size_t)c->tokens * c->nh * c->hd;
    memcpy(c->y, c->x, n * sizeof(double));
    ref_rope(c->y, c->pos, c->tokens, c->nh, c->hd, THETA, 0);
    return bt_dot(c->r, c->y, n);
}

static void check_rope(int tokens, int nh, int hd)
{
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make((uint64_t)tokens * 31 + hd);
    size_t n = (size_t)tokens * nh * hd;
    float *cos_t = malloc(MAX_POS * hd / 2 * 4), *sin_t = malloc(MAX_POS * hd / 2 * 4);
    make_tables(cos_t, sin_t, hd);
    int32_t *pos = malloc(tokens * 4);
    for (int t = 0; t < tokens; t++)
        pos[t] = t % 2 ? bt_rng_int(&rng, MAX_POS) : t; /* packed rows restart positions */
    float *x = malloc(n * 4), *r = malloc(n * 4), *got = malloc(n * 4);
    bt_fill_uniform(x, n, &rng, -1, 1);
    bt_fill_uniform(r, n, &rng, -1, 1);
    float *d_cos = bt_upload(be, cos_t, MAX_POS * hd / 2), *d_sin = bt_upload(be, sin_t, MAX_POS * hd / 2);
    int32_t *d_pos = bt_upload_i32(be, pos, tokens);
    float *d_x = bt_upload(be, x, n), *d_r = bt_upload(be, r, n);

    rope_ctx c = {bt_to_double(x, n), malloc(n * 8), bt_to_double(r, n), pos, tokens, nh, hd};
    rope_objective(&c); /* c.y = rope(x) in double */
    be->ops->rope(be, FT_DTYPE_F32, d_x, d_cos, d_sin, d_pos, tokens, nh, hd, false);
    bt_download(be, got, d_x, n);
    assert_true(bt_close("rope forward", got, c.y, n, 1e-5, 1e-6));
    be->ops->rope(be, FT_DTYPE_F32, d_x, d_cos, d_sin, d_pos, tokens, nh, hd, true);
    bt_download(be, got, d_x, n);
    assert_true(bt_close_ff("rope inverse(forward)", got, x, n, 1e-6, 1e-7));

    /* Tokens are rotated independently: FD one token at a time. */
    double *g = malloc(n * 8);
    size_t per = (size_t)nh * hd;
    for (int t = 0; t < tokens; t++) {
        rope_ctx one = {c.x + t * per, c.y + t * per, c.r + t * per, pos + t, 1, nh, hd};
        bt_fd_gradient(g + t * per, one.x, per, 1e-4, rope_objective, &one);
    }
    be->ops->rope(be, FT_DTYPE_F32, d_r, d_cos, d_sin, d_pos, tokens, nh, hd, true); /* dx = R^T r */
    bt_download(be, got, d_r, n);
    assert_true(bt_close("rope backward (FD)", got, g, n, 1e-4, 1e-6));

    void *bufs[] = {d_cos, d_sin, d_pos, d_x, d_r};
    for (int i = 0; i < 5; i++)
        be->ops->free(be, bufs[i]);
    free(cos_t), free(sin_t), free(pos), free(x), free(r), free(got), free(g);
    free(c.x), free(c.y), free(c.r);
    ft_backend_destroy(be);
}

static void test_rope_small(void **state)
{
    (void)state;
    check_rope(7, 3, 8);
}

static void test_rope_llama_head(void **state)
{
    (void)state;
    check_rope(40, 4, 128);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_small),
        cmocka_unit_test(test_rope_llama_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
