/* Every transformer op of the CPU backend with bf16 storage (GPT-NeoX's and GPT-J's
 * layernorm, gelu, partial or interleaved rope and bias into fp32 logits included)
 * against the same op in fp32 on the same values: inputs are drawn, rounded to bf16
 * and widened, so both runs see identical numbers, and the bf16 run may differ only
 * by its roundings.
 *
 * Tolerances (max |got - want| <= rel * max |want| + abs):
 *  - an output rounded once to bf16 (8-bit mantissa, round to nearest) is within
 *    2^-9 of its value, relative to itself: rel 2^-8 leaves room for none else;
 *  - an output that accumulates (rmsnorm_bwd's dx, a bf16 gradient) is one rounding
 *    of (old + contribution): the same bound against the fp32 result;
 *  - fp32 outputs of bf16 operands (a GEMM into fp32, gradients into fp32, lse) are
 *    the fp32 computation on identical inputs: rel 1e-5 (summation order only);
 *  - attention keeps rel 2^-8 for out and 4 x 2^-8 for dq/dk/dv: native kernels may
 *    round the probabilities to bf16 for the P.V and dS GEMMs (the tensor-core
 *    kernels do), which perturbs each product by 2^-9 relative before the sum. */
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

#define ONE_ROUNDING (1.0 / 256.0)

typedef struct pair {
    float *f;     /* host fp32 values (bf16-representable) */
    uint16_t *h;  /* host bf16 bits of the same values */
    size_t n;
} pair;

static pair pair_random(bt_rng *r, size_t n, float lo, float hi)
{
    pair p = { malloc(n * 4 + 4), malloc(n * 2 + 2), n };
    bt_fill_uniform(p.f, n, r, lo, hi);
    for (size_t i = 0; i < n; i++) {
        p.h[i] = ft_f32_to_bf16(p.f[i]);
        p.f[i] = ft_bf16_to_f32(p.h[i]);
    }
    return p;
}

static void pair_free(pair p)
{
    free(p.f);
    free(p.h);
}

/* Both storages on the backend. */
typedef struct dev {
    float *f;
    uint16_t *h;
    size_t n;
} dev;

static dev dev_of(ft_backend *be, pair p)
{
    dev d = { be->ops->alloc(be, p.n * 4 + 4), be->ops->alloc(be, p.n * 2 + 2), p.n };
    be->ops->upload(be, d.f, p.f, p.n * 4);
    be->ops->upload(be, d.h, p.h, p.n * 2);
    return d;
}

static void dev_free(ft_backend *be, dev d)
{
    be->ops->free(be, d.f);
    be->ops->free(be, d.h);
}

/* Compares the bf16 buffer (widened) with the fp32 one. */
static void expect_close(ft_backend *be, const char *what, dev d, double rel, double abs_tol)
{
    float *got = malloc(d.n * 4 + 4), *want = malloc(d.n * 4 + 4);
    uint16_t *bits = malloc(d.n * 2 + 2);
    be->ops->download(be, bits, d.h, d.n * 2);
    be->ops->download(be, want, d.f, d.n * 4);
    for (size_t i = 0; i < d.n; i++)
        got[i] = ft_bf16_to_f32(bits[i]);
    assert_true(bt_close_ff(what, got, want, d.n, rel, abs_tol));
    free(got);
    free(want);
    free(bits);
}

/* Two fp32 buffers (a bf16 run's fp32 output against the fp32 run's). */
static void expect_close_f32(ft_backend *be, const char *what, const float *a, const float *b,
                             size_t n, double rel)
{
    float *x = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
    be->ops->download(be, x, a, n * 4);
    be->ops->download(be, y, b, n * 4);
    assert_true(bt_close_ff(what, x, y, n, rel, 1e-30));
    free(x);
    free(y);
}

static void test_matmul(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(11);
    const int m = 37, n = 29, k = 45;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                pair a = pair_random(&r, (size_t)m * k, -1, 1), b = pair_random(&r, (size_t)k * n, -1, 1);
                pair c = pair_random(&r, (size_t)m * n, -1, 1);
                dev da = dev_of(be, a), db = dev_of(be, b), dc = dev_of(be, c), dc32 = dev_of(be, c);
                be->ops->matmul(be, FT_GEMM_F32, dc.f, da.f, db.f, m, n, k, ta, tb, 0.5f, (float)beta);
                ft_gemm_types all16 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_BF16 };
                be->ops->matmul(be, all16, dc.h, da.h, db.h, m, n, k, ta, tb, 0.5f, (float)beta);
                expect_close(be, "matmul bf16 -> bf16", dc, ONE_ROUNDING, 0);
                ft_gemm_types to32 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_F32 };
                be->ops->matmul(be, to32, dc32.f, da.h, db.h, m, n, k, ta, tb, 0.5f, (float)beta);
                expect_close_f32(be, "matmul bf16 -> fp32", dc32.f, dc.f, dc.n, 1e-5);
                dev_free(be, da), dev_free(be, db), dev_free(be, dc), dev_free(be, dc32);
                pair_free(a), pair_free(b), pair_free(c);
            }
    ft_backend_destroy(be);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(12);
    const int rows = 23, dim = 80;
    const size_t n = (size_t)rows * dim;
    pair x = pair_random(&r, n, -2, 2), w = pair_random(&r, dim, 0.5f, 1.5f);
    pair dy = pair_random(&r, n, -1, 1), dx = pair_random(&r, n, -1, 1);
    pair dw = pair_random(&r, dim, -1, 1);
    dev X = dev_of(be, x), W = dev_of(be, w), DY = dev_of(be, dy), DX = dev_of(be, dx);
    dev Y = dev_of(be, x), DW = dev_of(be, dw), DW32 = dev_of(be, dw);
    float *rs = be->ops->alloc(be, rows * 4), *rs16 = be->ops->alloc(be, rows * 4);
    be->ops->rmsnorm_fwd(be, FT_DTYPE_F32, Y.f, rs, X.f, W.f, rows, dim, 1e-5f);
    be->ops->rmsnorm_fwd(be, FT_DTYPE_BF16, Y.h, rs16, X.h, W.h, rows, dim, 1e-5f);
    expect_close(be, "rmsnorm_fwd y", Y, ONE_ROUNDING, 0);
    expect_close_f32(be, "rmsnorm_fwd rstd", rs16, rs, rows, 1e-6);
    /* dw into an fp32 gradient (DW32.f, from bf16 activations) and a bf16 one (DW.h) */
    be->ops->rmsnorm_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, DX.f, DX.f, DW.f, DY.f, X.f, W.f, rs, rows,
                         dim);
    be->ops->rmsnorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_BF16, DX.h, DX.h, DW.h, DY.h, X.h, W.h, rs,
                         rows, dim);
    expect_close(be, "rmsnorm_bwd dx (accumulated)", DX, ONE_ROUNDING, 0);
    expect_close(be, "rmsnorm_bwd dw (bf16 gradient)", DW, ONE_ROUNDING, 0);
    float *dx_scratch = be->ops->alloc(be, n * 2 + 2);
    be->ops->upload(be, dx_scratch, dx.h, n * 2);
    be->ops->rmsnorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_F32, dx_scratch, dx_scratch, DW32.f, DY.h, X.h,
                         W.h, rs, rows, dim);
    expect_close_f32(be, "rmsnorm_bwd dw (fp32 gradient)", DW32.f, DW.f, dim, 1e-5);
    be->ops->free(be, dx_scratch);
    be->ops->free(be, rs), be->ops->free(be, rs16);
    dev_free(be, X), dev_free(be, W), dev_free(be, DY), dev_free(be, DX), dev_free(be, Y);
    dev_free(be, DW), dev_free(be, DW32);
    pair_free(x), pair_free(w), pair_free(dy), pair_free(dx), pair_free(dw);
    ft_backend_destroy(be);
}

static void test_elementwise(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(13);
    const int rows = 19, dim = 48, tokens = rows, heads = 3, hd = 16;
    const size_t n = (size_t)rows * dim;
    pair g = pair_random(&r, n, -3, 3), u = pair_random(&r, n, -2, 2), d = pair_random(&r, n, -1, 1);
    pair b = pair_random(&r, dim, -1, 1), db = pair_random(&r, dim, -1, 1);
    dev G = dev_of(be, g), U = dev_of(be, u), D = dev_of(be, d), O = dev_of(be, g);
    dev DG = dev_of(be, g), DU = dev_of(be, u), B = dev_of(be, b), DB = dev_of(be, db);
    be->ops->swiglu_fwd(be, FT_DTYPE_F32, O.f, G.f, U.f, n);
    be->ops->swiglu_fwd(be, FT_DTYPE_BF16, O.h, G.h, U.h, n);
    expect_close(be, "swiglu_fwd", O, ONE_ROUNDING, 0);
    be->ops->swiglu_bwd(be, FT_DTYPE_F32, DG.f, DU.f, D.f, G.f, U.f, n, NULL);
    be->ops->swiglu_bwd(be, FT_DTYPE_BF16, DG.h, DU.h, D.h, G.h, U.h, n, NULL);
    expect_close(be, "swiglu_bwd dgate", DG, ONE_ROUNDING, 0);
    expect_close(be, "swiglu_bwd dup", DU, ONE_ROUNDING, 0);
    be->ops->bias_add(be, FT_DTYPE_F32, FT_DTYPE_F32, U.f, B.f, rows, dim);
    be->ops->bias_add(be, FT_DTYPE_BF16, FT_DTYPE_BF16, U.h, B.h, rows, dim);
    expect_close(be, "bias_add", U, ONE_ROUNDING, 0);
    be->ops->bias_grad(be, FT_DTYPE_F32, FT_DTYPE_F32, DB.f, D.f, rows, dim);
    be->ops->bias_grad(be, FT_DTYPE_BF16, FT_DTYPE_BF16, DB.h, D.h, rows, dim);
    expect_close(be, "bias_grad (bf16 gradient)", DB, ONE_ROUNDING, 0);

    /* rope on [tokens, heads*hd], forward then inverse */
    pair q = pair_random(&r, (size_t)tokens * heads * hd, -2, 2);
    dev Q = dev_of(be, q);
    float *cs = malloc(64 * hd / 2 * 4), *sn = malloc(64 * hd / 2 * 4);
    for (int p = 0; p < 64; p++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = p * pow(10000.0, -2.0 * i / hd);
            cs[p * hd / 2 + i] = (float)cos(ang);
            sn[p * hd / 2 + i] = (float)sin(ang);
        }
    int32_t pos[64];
    for (int t = 0; t < tokens; t++)
        pos[t] = (t * 7) % 64;
    float *dcs = bt_upload(be, cs, 64 * hd / 2), *dsn = bt_upload(be, sn, 64 * hd / 2);
    int32_t *dpos = bt_upload_i32(be, pos, (size_t)tokens);
    for (int inv = 0; inv < 2; inv++) {
        be->ops->rope(be, FT_DTYPE_F32, Q.f, dcs, dsn, dpos, tokens, heads,
                      (ft_rope_shape){ hd, hd, false }, inv);
        be->ops->rope(be, FT_DTYPE_BF16, Q.h, dcs, dsn, dpos, tokens, heads,
                      (ft_rope_shape){ hd, hd, false }, inv);
        /* the second rotation starts from a rounded first one: two roundings */
        expect_close(be, inv ? "rope inverse" : "rope", Q, (1 + inv) * ONE_ROUNDING, 0);
    }
    free(cs), free(sn);
    be->ops->free(be, dcs), be->ops->free(be, dsn), be->ops->free(be, dpos);
    dev_free(be, Q), pair_free(q);
    dev_free(be, G), dev_free(be, U), dev_free(be, D), dev_free(be, O), dev_free(be, DG);
    dev_free(be, DU), dev_free(be, B), dev_free(be, DB);
    pair_free(g), pair_free(u), pair_free(d), pair_free(b), pair_free(db);
    ft_backend_destroy(be);
}

static void test_embedding(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(14);
    const int vocab = 31, dim = 40, tokens = 57;
    pair table = pair_random(&r, (size_t)vocab * dim, -1, 1);
    pair dout = pair_random(&r, (size_t)tokens * dim, -1, 1);
    pair gt = pair_random(&r, (size_t)vocab * dim, -1, 1);
    int32_t ids[57];
    for (int t = 0; t < tokens; t++)
        ids[t] = bt_rng_int(&r, 7) * 4; /* few distinct ids, many repeats */
    int32_t *dids = bt_upload_i32(be, ids, tokens);
    dev T = dev_of(be, table), DO = dev_of(be, dout), DT = dev_of(be, gt);
    pair o = pair_random(&r, (size_t)tokens * dim, 0, 1);
    dev O = dev_of(be, o);
    be->ops->embedding_fwd(be, FT_DTYPE_F32, O.f, T.f, dids, tokens, dim);
    be->ops->embedding_fwd(be, FT_DTYPE_BF16, O.h, T.h, dids, tokens, dim);
    expect_close(be, "embedding_fwd (exact)", O, 0, 0);
    be->ops->embedding_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, DT.f, DO.f, dids, tokens, dim);
    be->ops->embedding_bwd(be, FT_DTYPE_BF16, FT_DTYPE_BF16, DT.h, DO.h, dids, tokens, dim);
    /* each row summed in fp32 and rounded once, however many tokens hit it */
    expect_close(be, "embedding_bwd (bf16 gradient)", DT, ONE_ROUNDING, 0);
    be->ops->free(be, dids);
    dev_free(be, T), dev_free(be, DO), dev_free(be, DT), dev_free(be, O);
    pair_free(table), pair_free(dout), pair_free(gt), pair_free(o);
    ft_backend_destroy(be);
}

static void check_attention(int batch, int T, int heads, int kv, int hd, int window, int docs)
{
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make((uint64_t)T * 131 + hd + window);
    ft_attn_shape s = { batch, T, heads, kv, hd, window };
    const size_t tok = (size_t)batch * T, nq = tok * heads * hd, nkv = tok * kv * hd;
    pair q = pair_random(&r, nq, -1, 1), k = pair_random(&r, nkv, -1, 1);
    pair v = pair_random(&r, nkv, -1, 1), dout = pair_random(&r, nq, -1, 1);
    int32_t *seg = malloc(tok * 4);
    for (size_t i = 0; i < tok; i++)
        seg[i] = (int32_t)((i % T) * docs / T);
    int32_t *dseg = bt_upload_i32(be, seg, tok);
    dev Q = dev_of(be, q), K = dev_of(be, k), V = dev_of(be, v), DO = dev_of(be, dout);
    dev O = dev_of(be, q), DQ = dev_of(be, q), DK = dev_of(be, k), DV = dev_of(be, v);
    float *lse = be->ops->alloc(be, tok * heads * 4), *lse16 = be->ops->alloc(be, tok * heads * 4);
    be->ops->attention_fwd(be, FT_DTYPE_F32, O.f, lse, Q.f, K.f, V.f, dseg, s);
    be->ops->attention_fwd(be, FT_DTYPE_BF16, O.h, lse16, Q.h, K.h, V.h, dseg, s);
    expect_close(be, "attention out", O, ONE_ROUNDING, 0);
    expect_close_f32(be, "attention lse", lse16, lse, tok * heads, 1e-3 / 32);
    /* the backward of each run from its own forward (the bf16 out is rounded) */
    be->ops->attention_bwd(be, FT_DTYPE_F32, DQ.f, DK.f, DV.f, DO.f, O.f, lse, Q.f, K.f, V.f, dseg, s);
    be->ops->attention_bwd(be, FT_DTYPE_BF16, DQ.h, DK.h, DV.h, DO.h, O.h, lse16, Q.h, K.h, V.h,
                           dseg, s);
    expect_close(be, "attention dq", DQ, 4 * ONE_ROUNDING, 0);
    expect_close(be, "attention dk", DK, 4 * ONE_ROUNDING, 0);
    expect_close(be, "attention dv", DV, 4 * ONE_ROUNDING, 0);
    be->ops->free(be, lse), be->ops->free(be, lse16), be->ops->free(be, dseg);
    dev_free(be, Q), dev_free(be, K), dev_free(be, V), dev_free(be, DO), dev_free(be, O);
    dev_free(be, DQ), dev_free(be, DK), dev_free(be, DV);
    pair_free(q), pair_free(k), pair_free(v), pair_free(dout);
    free(seg);
    ft_backend_destroy(be);
}

static void test_attention(void **state)
{
    (void)state;
    check_attention(2, 37, 4, 2, 64, 0, 1);  /* causal, GQA, odd length */
    check_attention(1, 130, 2, 1, 128, 0, 3); /* three documents per row */
    check_attention(1, 70, 2, 2, 80, 9, 1);   /* sliding window, head_dim 80 */
    check_attention(1, 1, 2, 1, 256, 0, 1);   /* one token, head_dim 256 */
}

static void test_attention_decode(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(15);
    const int past = 21, n_new = 3, heads = 4, kv = 2, hd = 32, len = past + n_new;
    pair q = pair_random(&r, (size_t)n_new * heads * hd, -1, 1);
    pair k = pair_random(&r, (size_t)len * kv * hd, -1, 1), v = pair_random(&r, (size_t)len * kv * hd, -1, 1);
    dev Q = dev_of(be, q), K = dev_of(be, k), V = dev_of(be, v), O = dev_of(be, q);
    be->ops->attention_decode(be, FT_DTYPE_F32, O.f, Q.f, K.f, V.f, past, n_new, heads, kv, hd, 0);
    be->ops->attention_decode(be, FT_DTYPE_BF16, O.h, Q.h, K.h, V.h, past, n_new, heads, kv, hd, 0);
    expect_close(be, "attention_decode", O, ONE_ROUNDING, 0);
    dev_free(be, Q), dev_free(be, K), dev_free(be, V), dev_free(be, O);
    pair_free(q), pair_free(k), pair_free(v);
    ft_backend_destroy(be);
}

static void test_layernorm(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(15);
    const int rows = 21, dim = 72;
    const size_t n = (size_t)rows * dim;
    pair x = pair_random(&r, n, -2, 2), w = pair_random(&r, dim, 0.5f, 1.5f);
    pair b = pair_random(&r, dim, -0.5f, 0.5f), dy = pair_random(&r, n, -1, 1);
    pair dx = pair_random(&r, n, -1, 1), dw = pair_random(&r, dim, -1, 1);
    pair db = pair_random(&r, dim, -1, 1);
    dev X = dev_of(be, x), W = dev_of(be, w), B = dev_of(be, b), DY = dev_of(be, dy);
    dev DX = dev_of(be, dx), Y = dev_of(be, x), DW = dev_of(be, dw), DB = dev_of(be, db);
    dev DW32 = dev_of(be, dw), DB32 = dev_of(be, db);
    float *mu = be->ops->alloc(be, rows * 4), *rs = be->ops->alloc(be, rows * 4);
    float *mu16 = be->ops->alloc(be, rows * 4), *rs16 = be->ops->alloc(be, rows * 4);
    be->ops->layernorm_fwd(be, FT_DTYPE_F32, Y.f, mu, rs, X.f, W.f, B.f, rows, dim, 1e-5f);
    be->ops->layernorm_fwd(be, FT_DTYPE_BF16, Y.h, mu16, rs16, X.h, W.h, B.h, rows, dim, 1e-5f);
    expect_close(be, "layernorm_fwd y", Y, ONE_ROUNDING, 0);
    expect_close_f32(be, "layernorm_fwd mean", mu16, mu, rows, 1e-6);
    expect_close_f32(be, "layernorm_fwd rstd", rs16, rs, rows, 1e-6);
    /* dw, db into bf16 gradients (DW.h, DB.h) and fp32 ones from bf16 activations */
    be->ops->layernorm_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, DX.f, DX.f, DW.f, DB.f, DY.f, X.f, W.f,
                           mu, rs, rows, dim);
    be->ops->layernorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_BF16, DX.h, DX.h, DW.h, DB.h, DY.h, X.h, W.h,
                           mu, rs, rows, dim);
    expect_close(be, "layernorm_bwd dx (accumulated)", DX, ONE_ROUNDING, 0);
    expect_close(be, "layernorm_bwd dw (bf16 gradient)", DW, ONE_ROUNDING, 0);
    expect_close(be, "layernorm_bwd db (bf16 gradient)", DB, ONE_ROUNDING, 0);
    uint16_t *dx_scratch = be->ops->alloc(be, n * 2 + 2);
    be->ops->upload(be, dx_scratch, dx.h, n * 2);
    be->ops->layernorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_F32, dx_scratch, dx_scratch, DW32.f, DB32.f,
                           DY.h, X.h, W.h, mu, rs, rows, dim);
    expect_close_f32(be, "layernorm_bwd dw (fp32 gradient)", DW32.f, DW.f, dim, 1e-5);
    expect_close_f32(be, "layernorm_bwd db (fp32 gradient)", DB32.f, DB.f, dim, 1e-5);
    be->ops->free(be, dx_scratch);
    be->ops->free(be, mu), be->ops->free(be, rs), be->ops->free(be, mu16), be->ops->free(be, rs16);
    dev_free(be, X), dev_free(be, W), dev_free(be, B), dev_free(be, DY), dev_free(be, DX);
    dev_free(be, Y), dev_free(be, DW), dev_free(be, DB), dev_free(be, DW32), dev_free(be, DB32);
    pair_free(x), pair_free(w), pair_free(b), pair_free(dy), pair_free(dx), pair_free(dw);
    pair_free(db);
    ft_backend_destroy(be);
}

static void test_gelu(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(16);
    const size_t n = 1037;
    pair x = pair_random(&r, n, -5, 5), d = pair_random(&r, n, -1, 1);
    for (int kind = FT_GELU_ERF; kind <= FT_GELU_TANH; kind++) {
        const char *fwd = kind == FT_GELU_ERF ? "gelu_fwd erf" : "gelu_fwd tanh";
        const char *bwd = kind == FT_GELU_ERF ? "gelu_bwd erf" : "gelu_bwd tanh";
        dev X = dev_of(be, x), O = dev_of(be, x), D = dev_of(be, d), DX = dev_of(be, d);
        be->ops->gelu_fwd(be, FT_DTYPE_F32, (ft_gelu_kind)kind, O.f, X.f, n);
        be->ops->gelu_fwd(be, FT_DTYPE_BF16, (ft_gelu_kind)kind, O.h, X.h, n);
        expect_close(be, fwd, O, ONE_ROUNDING, 0);
        be->ops->gelu_bwd(be, FT_DTYPE_F32, (ft_gelu_kind)kind, DX.f, D.f, X.f, n);
        be->ops->gelu_bwd(be, FT_DTYPE_BF16, (ft_gelu_kind)kind, DX.h, D.h, X.h, n);
        expect_close(be, bwd, DX, ONE_ROUNDING, 0);
        /* in place over dout: the same bits as into a separate buffer */
        be->ops->gelu_bwd(be, FT_DTYPE_BF16, (ft_gelu_kind)kind, D.h, D.h, X.h, n);
        uint16_t *a = malloc(n * 2), *c = malloc(n * 2);
        be->ops->download(be, a, D.h, n * 2), be->ops->download(be, c, DX.h, n * 2);
        assert_memory_equal(a, c, n * 2);
        free(a), free(c);
        dev_free(be, X), dev_free(be, O), dev_free(be, D), dev_free(be, DX);
    }
    pair_free(x), pair_free(d);
    ft_backend_destroy(be);
}

/* GPT-NeoX's partial half-split rotation and GPT-J's interleaved one. */
static void test_rope_geometry(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(17);
    const int tokens = 13, heads = 3, hd = 40, rot = 10, max_pos = 64;
    float *cs = malloc(max_pos * rot / 2 * 4), *sn = malloc(max_pos * rot / 2 * 4);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < rot / 2; i++) {
            double ang = p * pow(10000.0, -2.0 * i / rot);
            cs[p * rot / 2 + i] = (float)cos(ang);
            sn[p * rot / 2 + i] = (float)sin(ang);
        }
    int32_t pos[13];
    for (int t = 0; t < tokens; t++)
        pos[t] = (t * 11) % max_pos;
    float *dcs = bt_upload(be, cs, (size_t)max_pos * rot / 2);
    float *dsn = bt_upload(be, sn, (size_t)max_pos * rot / 2);
    int32_t *dpos = bt_upload_i32(be, pos, (size_t)tokens);
    for (int il = 0; il < 2; il++) {
        const ft_rope_shape shape = { hd, rot, il == 1 };
        pair q = pair_random(&r, (size_t)tokens * heads * hd, -2, 2);
        dev Q = dev_of(be, q);
        for (int inv = 0; inv < 2; inv++) {
            be->ops->rope(be, FT_DTYPE_F32, Q.f, dcs, dsn, dpos, tokens, heads, shape, inv);
            be->ops->rope(be, FT_DTYPE_BF16, Q.h, dcs, dsn, dpos, tokens, heads, shape, inv);
            expect_close(be, il ? "rope interleaved" : "rope partial", Q,
                         (1 + inv) * ONE_ROUNDING, 0);
        }
        dev_free(be, Q), pair_free(q);
    }
    free(cs), free(sn);
    be->ops->free(be, dcs), be->ops->free(be, dsn), be->ops->free(be, dpos);
    ft_backend_destroy(be);
}

/* GPT-J's lm_head: a bf16 bias added to fp32 logits, no rounding at all. */
static void test_bias_add_into_f32(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng r = bt_rng_make(18);
    const int rows = 7, dim = 101;
    pair y = pair_random(&r, (size_t)rows * dim, -8, 8), b = pair_random(&r, dim, -1, 1);
    float *y32 = bt_upload(be, NULL, (size_t)rows * dim);
    bt_fill_uniform(y.f, y.n, &r, -8, 8); /* logits: not bf16-representable */
    dev Y = dev_of(be, y), B = dev_of(be, b);
    be->ops->upload(be, y32, y.f, y.n * 4);
    be->ops->bias_add(be, FT_DTYPE_F32, FT_DTYPE_F32, Y.f, B.f, rows, dim);
    be->ops->bias_add(be, FT_DTYPE_BF16, FT_DTYPE_F32, y32, B.h, rows, dim);
    float *got = malloc(y.n * 4), *want = malloc(y.n * 4);
    bt_download(be, got, y32, y.n), bt_download(be, want, Y.f, y.n);
    assert_memory_equal(got, want, y.n * 4);
    free(got), free(want);
    be->ops->free(be, y32);
    dev_free(be, Y), dev_free(be, B), pair_free(y), pair_free(b);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),    cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_elementwise), cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_decode),
        cmocka_unit_test(test_layernorm), cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_rope_geometry), cmocka_unit_test(test_bias_add_into_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
