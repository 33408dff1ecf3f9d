/* Rotary embedding, every geometry of ft_rope_shape (half-split and interleaved
 * pairs, rot_dim = head_dim and rot_dim < head_dim):
 *  - forward against Hugging Face's formulas in double (ref_rope_hf: x*cos +
 *    rotate_half(x)*sin, or rotate_every_two for GPT-J), tables built from fp32
 *    angles (|err| <= 1e-5 max|ref| + 1e-6); the dimensions past rot_dim unchanged
 *    bit for bit;
 *  - inverse(forward(x)) == x to fp32 rounding;
 *  - the backward (the inverse rotation applied to dy) against finite differences of
 *    L = sum r o rope(x) (|err| <= 1e-4 max|g| + 1e-6): the inverse is the transpose;
 *  - half-split with rot_dim = head_dim is Llama's rotation as it was before the
 *    geometry existed (ref_rope, the original reference). */
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

/* cos/sin tables [MAX_POS, rot_dim/2] as a model would build them. */
static void make_tables(float *cos_t, float *sin_t, int rot_dim)
{
    int half = rot_dim / 2;
    for (int p = 0; p < MAX_POS; p++)
        for (int i = 0; i < half; i++) {
            double angle = p * pow(THETA, -2.0 * i / rot_dim);
            cos_t[p * half + i] = (float)cos(angle);
            sin_t[p * half + i] = (float)sin(angle);
        }
}

typedef struct rope_ctx {
    double *x, *y, *r;
    const int32_t *pos;
    int tokens, nh;
    ft_rope_shape shape;
} rope_ctx;

static double rope_objective(void *p)
{
    rope_ctx *c = p;
    size_t n = (size_t)c->tokens * c->nh * c->shape.head_dim;
    memcpy(c->y, c->x, n * sizeof(double));
    ref_rope_hf(c->y, c->pos, c->tokens, c->nh, c->shape, THETA, 0);
    return bt_dot(c->r, c->y, n);
}

static void check_rope(int tokens, int nh, int hd, int rot_dim, bool interleaved)
{
    const ft_rope_shape shape = {hd, rot_dim, interleaved};
    char what[96];
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make((uint64_t)tokens * 31 + hd + rot_dim * 7 + interleaved);
    size_t n = (size_t)tokens * nh * hd, tab = (size_t)MAX_POS * rot_dim / 2;
    float *cos_t = malloc(tab * 4), *sin_t = malloc(tab * 4);
    make_tables(cos_t, sin_t, rot_dim);
    int32_t *pos = malloc(tokens * 4);
    for (int t = 0; t < tokens; t++)
        pos[t] = t % 2 ? bt_rng_int(&rng, MAX_POS) : t; /* packed rows restart positions */
    float *x = malloc(n * 4), *r = malloc(n * 4), *got = malloc(n * 4);
    bt_fill_uniform(x, n, &rng, -1, 1);
    bt_fill_uniform(r, n, &rng, -1, 1);
    float *d_cos = bt_upload(be, cos_t, tab), *d_sin = bt_upload(be, sin_t, tab);
    int32_t *d_pos = bt_upload_i32(be, pos, tokens);
    float *d_x = bt_upload(be, x, n), *d_r = bt_upload(be, r, n);
    snprintf(what, sizeof what, "rope hd=%d rot=%d %s", hd, rot_dim,
             interleaved ? "interleaved" : "half-split");

    rope_ctx c = {bt_to_double(x, n), malloc(n * 8), bt_to_double(r, n), pos, tokens, nh, shape};
    rope_objective(&c); /* c.y = rope(x) in double */
    be->ops->rope(be, FT_DTYPE_F32, d_x, d_cos, d_sin, d_pos, tokens, nh, shape, false);
    bt_download(be, got, d_x, n);
    print_message("%s\n", what);
    assert_true(bt_close("rope forward", got, c.y, n, 1e-5, 1e-6));
    for (size_t th = 0; th < (size_t)tokens * nh; th++) /* the pass-through dimensions */
        assert_memory_equal(got + th * hd + rot_dim, x + th * hd + rot_dim,
                            (size_t)(hd - rot_dim) * 4);
    if (rot_dim == hd && !interleaved) { /* Llama's rotation, as before */
        double *old = bt_to_double(x, n);
        ref_rope(old, pos, tokens, nh, hd, THETA, 0);
        assert_true(bt_close("rope forward (Llama reference)", got, old, n, 1e-5, 1e-6));
        free(old);
    }
    be->ops->rope(be, FT_DTYPE_F32, d_x, d_cos, d_sin, d_pos, tokens, nh, shape, true);
    bt_download(be, got, d_x, n);
    assert_true(bt_close_ff("rope inverse(forward)", got, x, n, 1e-6, 1e-7));

    /* Tokens are rotated independently: FD one token at a time. */
    double *g = malloc(n * 8);
    size_t per = (size_t)nh * hd;
    for (int t = 0; t < tokens; t++) {
        rope_ctx one = {c.x + t * per, c.y + t * per, c.r + t * per, pos + t, 1, nh, shape};
        bt_fd_gradient(g + t * per, one.x, per, 1e-4, rope_objective, &one);
    }
    be->ops->rope(be, FT_DTYPE_F32, d_r, d_cos, d_sin, d_pos, tokens, nh, shape, true); /* R^T r */
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
    check_rope(7, 3, 8, 8, false);
}

static void test_rope_llama_head(void **state)
{
    (void)state;
    check_rope(40, 4, 128, 128, false);
}

/* The two references agree where both apply (a check of the HF-style reference). */
static void test_rope_references_agree(void **state)
{
    (void)state;
    const int tokens = 5, nh = 2, hd = 12;
    int32_t pos[5] = {0, 3, 17, 4, 250};
    double a[5 * 2 * 12], b[5 * 2 * 12];
    bt_rng rng = bt_rng_make(5);
    for (int i = 0; i < tokens * nh * hd; i++)
        a[i] = b[i] = bt_rng_uniform(&rng, -1, 1);
    ref_rope(a, pos, tokens, nh, hd, THETA, 0);
    ref_rope_hf(b, pos, tokens, nh, (ft_rope_shape){hd, hd, false}, THETA, 0);
    for (int i = 0; i < tokens * nh * hd; i++)
        assert_true(fabs(a[i] - b[i]) < 1e-12);
}

/* GPT-NeoX (Pythia): rotary_pct 0.25 of a 64-wide head; an odd number of pairs too. */
static void test_rope_partial_half_split(void **state)
{
    (void)state;
    check_rope(9, 3, 64, 16, false);
    check_rope(5, 2, 20, 6, false);
}

/* GPT-J: rotate_every_two over rotary_dim 64 of 256, and over the whole head. */
static void test_rope_interleaved(void **state)
{
    (void)state;
    check_rope(6, 2, 256, 64, true);
    check_rope(7, 3, 16, 16, true);
    check_rope(5, 2, 20, 6, true);
}

/* tokens x heads x head_dim above FT_CPU_PAR_MIN: the threaded loop. */
static void test_rope_parallel_path(void **state)
{
    (void)state;
    check_rope(80, 8, 64, 16, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_small),
        cmocka_unit_test(test_rope_llama_head),
        cmocka_unit_test(test_rope_references_agree),
        cmocka_unit_test(test_rope_partial_half_split),
        cmocka_unit_test(test_rope_interleaved),
        cmocka_unit_test(test_rope_parallel_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
