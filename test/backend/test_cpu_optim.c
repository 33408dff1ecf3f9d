/* AdamW and SGD steps.
 *  - Golden values from PyTorch (torch.optim.AdamW / SGD, foreach=False), five
 *    steps on 8 parameters; must match to 1e-6 relative per element (PyTorch's
 *    vectorised lerp uses an FMA, so m may differ by an ulp).
 *  - A double-precision textbook AdamW over 20 steps: |err| <= 1e-5 max|ref|.
 *  - SGD momentum against a scalar reference, and decoupled weight decay.
 *  - grad_scale (clipping's multiplier in the update) bitwise a scaling pass before it.
 *  - adamw_rows_bf16: the update's bf16 bits of the rows listed, before the update.
 * The golden numbers were produced by (parameters rounded to fp32 first):
 *   f32 = lambda x: float(np.float32(x))
 *   p0 = torch.tensor([0.5 - 0.137 * i for i in range(8)], dtype=torch.float32)
 *   grad(step) = torch.tensor([((i*7 + step*3) % 11 - 5) * 0.01 * (1 + step) for i in range(8)], dtype=torch.float32)
 *   AdamW([p], lr=f32(1e-3), betas=(f32(0.9), f32(0.999)), eps=f32(1e-8), weight_decay=f32(0.1), foreach=False)
 *   SGD([p], lr=f32(0.05), momentum=f32(0.9), foreach=False)   (no weight decay: torch's is coupled)
 *   for step in 1..5: p.grad = grad(step); opt.step() */
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

#define N_GOLDEN 8

static const float torch_adamw_p[N_GOLDEN] = {
    0x1.00512ap-1f, 0x1.725082p-2f, 0x1.cb54fep-3f, 0x1.75731cp-4f,
    -0x1.910e58p-5f, -0x1.79e99p-3f, -0x1.4823d4p-2f, -0x1.d5b4ccp-2f};
static const float torch_adamw_m[N_GOLDEN] = {
    -0x1.78177p-7f, -0x1.0e560cp-6f, 0x1.2d7a9p-8f, -0x1.d67e2ep-6f,
    0x1.0847d2p-5f, -0x1.9e27a4p-7f, 0x1.d08bap-9f, 0x1.ec3a58p-7f};
static const float torch_adamw_v[N_GOLDEN] = {
    0x1.2c4ea6p-14f, 0x1.11b3e4p-13f, 0x1.dfd5dap-15f, 0x1.8d9756p-14f,
    0x1.00842ep-13f, 0x1.024e5cp-14f, 0x1.c70facp-14f, 0x1.83faf4p-14f};
static const float torch_sgd_p[N_GOLDEN] = {
    0x1.01b74ep-1f, 0x1.6f5c2ap-2f, 0x1.c60b2p-3f, 0x1.d61eap-4f,
    -0x1.015642p-4f, -0x1.55c2d4p-3f, -0x1.4de056p-2f, -0x1.ce3c88p-2f};

static void golden_p0(float *p)
{
    for (int i = 0; i < N_GOLDEN; i++)
        p[i] = (float)(0.5 - 0.137 * i);
}

static void golden_grad(float *g, int step)
{
    for (int i = 0; i < N_GOLDEN; i++)
        g[i] = (float)((double)((i * 7 + step * 3) % 11 - 5) * 0.01 * (double)(1 + step));
}

/* |got - want| <= rel * |want| per element. */
static void assert_close_each(const char *what, const float *got, const float *want, int n, double rel)
{
    for (int i = 0; i < n; i++)
        if (fabs((double)got[i] - want[i]) > rel * fabs((double)want[i]))
            fail_msg("%s[%d]: got %a want %a", what, i, got[i], want[i]);
}

static void test_adamw_matches_pytorch(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    float p[N_GOLDEN], g[N_GOLDEN], m[N_GOLDEN], v[N_GOLDEN];
    golden_p0(p);
    float *dp = bt_upload(be, p, N_GOLDEN), *dg = bt_upload(be, NULL, N_GOLDEN);
    float *dm = bt_upload(be, NULL, N_GOLDEN), *dv = bt_upload(be, NULL, N_GOLDEN);
    for (int step = 1; step <= 5; step++) {
        golden_grad(g, step);
        be->ops->upload(be, dg, g, sizeof g);
        ft_adamw_params hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, step, NULL, 1.0f, 0, false};
        be->ops->adamw_step(be, dp, dg, dm, dv, N_GOLDEN, &hp);
    }
    bt_download(be, p, dp, N_GOLDEN), bt_download(be, m, dm, N_GOLDEN), bt_download(be, v, dv, N_GOLDEN);
    assert_close_each("adamw p", p, torch_adamw_p, N_GOLDEN, 1e-6);
    assert_close_each("adamw m", m, torch_adamw_m, N_GOLDEN, 1e-6);
    assert_close_each("adamw v", v, torch_adamw_v, N_GOLDEN, 1e-6);
    be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm), be->ops->free(be, dv);
    ft_backend_destroy(be);
}

/* no_decay_from: one update whose tail is exempt from weight decay gives the bits of two,
 * the head with the weight decay and the tail with weight_decay 0 (the engine's unit:
 * 2-D weights first, then norms and biases), for the parameters, both moments and the
 * bf16 copy. */
/* One AdamW run's state on the host (p, m, v and its bf16 copy), the device buffers freed
 * (dg with them). */
typedef struct adamw_result {
    float *pmv[3];
    uint16_t *bits;
} adamw_result;

static adamw_result fetch_adamw(ft_backend *be, float *dp, float *dg, float *dm, float *dv,
                                uint16_t *db, size_t n)
{
    adamw_result r;
    float *bufs[3] = {dp, dm, dv};
    for (int b = 0; b < 3; b++) {
        r.pmv[b] = malloc(n * 4);
        bt_download(be, r.pmv[b], bufs[b], n);
    }
    r.bits = malloc(n * 2);
    be->ops->download(be, r.bits, db, n * 2);
    be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm);
    be->ops->free(be, dv), be->ops->free(be, db);
    return r;
}

/* The two runs' states are bitwise the same; frees them. */
static void assert_adamw_runs_equal(adamw_result r[2], size_t n)
{
    for (int b = 0; b < 3; b++) {
        assert_memory_equal(r[0].pmv[b], r[1].pmv[b], n * 4);
        free(r[0].pmv[b]), free(r[1].pmv[b]);
    }
    assert_memory_equal(r[0].bits, r[1].bits, n * 2);
    free(r[0].bits), free(r[1].bits);
}

static void test_adamw_no_decay_tail(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(7);
    const size_t n = 40009, split = 30011;
    float *p = malloc(n * 4), *g = malloc(n * 4);
    bt_fill_uniform(p, n, &rng, -1, 1);
    bt_fill_uniform(g, n, &rng, -1, 1);
    adamw_result got[2];
    for (int one = 0; one < 2; one++) {
        float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
        float *dm = bt_upload(be, NULL, n), *dv = bt_upload(be, NULL, n);
        uint16_t *db = be->ops->alloc(be, n * 2);
        for (int t = 1; t <= 3; t++) {
            ft_adamw_params ap = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, db, 0.7f, 0, false};
            if (one) {
                ap.no_decay_from = split;
                be->ops->adamw_step(be, dp, dg, dm, dv, n, &ap);
            } else {
                be->ops->adamw_step(be, dp, dg, dm, dv, split, &ap);
                ap.weight_decay = 0.0f;
                ap.bf16_out = db + split;
                be->ops->adamw_step(be, dp + split, dg + split, dm + split, dv + split, n - split,
                                    &ap);
            }
        }
        got[one] = fetch_adamw(be, dp, dg, dm, dv, db, n);
    }
    assert_adamw_runs_equal(got, n);
    /* and the exemption is there: one step with it against one without, from the same
     * state, agree on the head and differ on the tail */
    float *after[2];
    for (int exempt = 0; exempt < 2; exempt++) {
        float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
        float *dm = bt_upload(be, NULL, n), *dv = bt_upload(be, NULL, n);
        ft_adamw_params ap = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, NULL, 1.0f, 0, false};
        ap.no_decay_from = exempt ? split : 0;
        be->ops->adamw_step(be, dp, dg, dm, dv, n, &ap);
        after[exempt] = malloc(n * 4);
        bt_download(be, after[exempt], dp, n);
        be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm), be->ops->free(be, dv);
    }
    assert_memory_equal(after[0], after[1], split * 4);
    size_t differ = 0;
    for (size_t i = split; i < n; i++)
        differ += after[0][i] != after[1][i];
    assert_true(differ > (n - split) / 2);
    free(after[0]), free(after[1]);
    free(p), free(g);
    ft_backend_destroy(be);
}

/* Textbook AdamW in double:
 *   p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) */
static void test_adamw_matches_double_reference(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(3);
    const size_t n = 50003; /* takes the parallel path */
    float *p = malloc(n * 4), *g = malloc(n * 4), *got = malloc(n * 4);
    double *rp = malloc(n * 8), *rm = calloc(n, 8), *rv = calloc(n, 8);
    bt_fill_uniform(p, n, &rng, -1, 1);
    for (size_t i = 0; i < n; i++)
        rp[i] = p[i];
    float *dp = bt_upload(be, p, n), *dg = bt_upload(be, NULL, n);
    float *dm = bt_upload(be, NULL, n), *dv = bt_upload(be, NULL, n);
    const float lr = 2e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-6f, wd = 0.05f;
    for (int t = 1; t <= 20; t++) {
        bt_fill_uniform(g, n, &rng, -0.1f, 0.1f);
        be->ops->upload(be, dg, g, n * 4);
        ft_adamw_params hp = {lr, b1, b2, eps, wd, t, NULL, 1.0f, 0, false};
        be->ops->adamw_step(be, dp, dg, dm, dv, n, &hp);
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        for (size_t i = 0; i < n; i++) {
            rp[i] *= 1 - (double)lr * wd;
            rm[i] = b1 * rm[i] + (1 - (double)b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - (double)b2) * g[i] * g[i];
            rp[i] -= lr * (rm[i] / bc1) / (sqrt(rv[i] / bc2) + eps);
        }
    }
    bt_download(be, got, dp, n);
    assert_true(bt_close("adamw 20 steps vs double", got, rp, n, 1e-5, 0));
    be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm), be->ops->free(be, dv);
    free(p), free(g), free(got), free(rp), free(rm), free(rv);
    ft_backend_destroy(be);
}

/* bf16_out: the same update (p, m, v bit for bit as without it) plus the RNE rounding
 * of the new p, as f32_to_bf16 would give. */
static void test_adamw_bf16_out(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(5);
    const size_t n = 40001;
    float *p = malloc(n * 4), *g = malloc(n * 4), *out[2][3];
    bt_fill_uniform(p, n, &rng, -1, 1);
    bt_fill_uniform(g, n, &rng, -0.1f, 0.1f);
    float *dg = bt_upload(be, g, n);
    uint16_t *dbits = be->ops->alloc(be, n * 2), *want = malloc(n * 2), *got = malloc(n * 2);
    for (int k = 0; k < 2; k++) {
        float *dp = bt_upload(be, p, n), *dm = bt_upload(be, NULL, n), *dv = bt_upload(be, NULL, n);
        for (int t = 1; t <= 3; t++) {
            ft_adamw_params hp = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, k == 1 ? dbits : NULL, 1.0f, 0, false};
            be->ops->adamw_step(be, dp, dg, dm, dv, n, &hp);
        }
        float *bufs[3] = {dp, dm, dv};
        for (int b = 0; b < 3; b++) {
            out[k][b] = malloc(n * 4);
            bt_download(be, out[k][b], bufs[b], n);
            be->ops->free(be, bufs[b]);
        }
    }
    for (int b = 0; b < 3; b++)
        assert_memory_equal(out[0][b], out[1][b], n * 4);
    be->ops->download(be, got, dbits, n * 2);
    for (size_t i = 0; i < n; i++)
        want[i] = ft_f32_to_bf16(out[0][0][i]);
    assert_memory_equal(got, want, n * 2);
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 3; b++)
            free(out[k][b]);
    be->ops->free(be, dg), be->ops->free(be, dbits);
    free(p), free(g), free(want), free(got);
    ft_backend_destroy(be);
}

/* moments_zero: an update that takes the moments as zeros without reading them gives
 * the bits of one that reads stored zeros (p, m, v and the bf16 copy; AdamW with a
 * no-decay tail, SGD with momentum), on values that probe the IEEE corner cases where
 * dropping a "+ 0" or "x 0" would change bits: signed zeros, subnormals, huge values.
 * The flagged update's moment buffers start as NaN, so any read of them would show. */
static void test_moments_zero_unread(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(11);
    const size_t n = 20011, nd = 15000;
    float *p = malloc(n * 4), *g = malloc(n * 4), *nan = malloc(n * 4);
    bt_fill_uniform(p, n, &rng, -1, 1);
    bt_fill_uniform(g, n, &rng, -0.1f, 0.1f);
    static const float corner[] = { 0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-127f, 3e38f,
                                    -3e38f, 1e-30f, -1e-30f };
    for (size_t i = 0; i < n; i += 7)
        g[i] = corner[(i / 7) % (sizeof corner / sizeof corner[0])];
    for (size_t i = 3; i < n; i += 11)
        p[i] = corner[(i / 11) % (sizeof corner / sizeof corner[0])];
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    adamw_result out[2];
    for (int flag = 0; flag < 2; flag++) {
        float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
        float *dm = bt_upload(be, flag ? nan : NULL, n), *dv = bt_upload(be, flag ? nan : NULL, n);
        uint16_t *db = be->ops->alloc(be, n * 2);
        ft_adamw_params ap = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, db, 0.75f, nd, false};
        ap.moments_zero = flag;
        be->ops->adamw_step(be, dp, dg, dm, dv, n, &ap);
        out[flag] = fetch_adamw(be, dp, dg, dm, dv, db, n);
    }
    assert_adamw_runs_equal(out, n);

    float *sgd[2][2];
    for (int flag = 0; flag < 2; flag++) {
        float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
        float *dm = bt_upload(be, flag ? nan : NULL, n);
        ft_sgd_params sp = { .lr = 1e-2f, .momentum = 0.9f, .weight_decay = 0.1f,
                             .grad_scale = 0.75f, .moments_zero = flag };
        be->ops->sgd_step(be, dp, dg, dm, n, &sp);
        float *bufs[2] = {dp, dm};
        for (int b = 0; b < 2; b++) {
            sgd[flag][b] = malloc(n * 4);
            bt_download(be, sgd[flag][b], bufs[b], n);
        }
        be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm);
    }
    for (int b = 0; b < 2; b++) {
        assert_memory_equal(sgd[0][b], sgd[1][b], n * 4);
        free(sgd[0][b]), free(sgd[1][b]);
    }
    free(p), free(g), free(nan);
    ft_backend_destroy(be);
}

/* adamw_rows_bf16: the bits the update writes, for the rows listed (repeated and out of
 * order, one past the no-decay split, the last row), nothing else written; from stored
 * moments (step 3) and from zeros unread (moments_zero, moment buffers NaN). */
static void test_adamw_rows_are_the_update_bits(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(17);
    enum { ROWS = 37, COLS = 19, N_LIST = 6 };
    const size_t n = (size_t)ROWS * COLS, nd = 30 * COLS + 4; /* the split inside row 30 */
    const int32_t list[N_LIST] = { 36, 2, 30, 2, 0, 17 };
    float *p = malloc(n * 4), *g = malloc(n * 4), *nan = malloc(n * 4);
    bt_fill_uniform(p, n, &rng, -1, 1);
    bt_fill_uniform(g, n, &rng, -0.1f, 0.1f);
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    for (int fresh = 0; fresh < 2; fresh++) {
        float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
        float *dm = bt_upload(be, fresh ? nan : NULL, n), *dv = bt_upload(be, fresh ? nan : NULL, n);
        /* lr and decay large enough that the decay's factor (0.95) shows in bf16 */
        ft_adamw_params ap = {5e-2f, 0.9f, 0.95f, 1e-8f, 1.0f, 1, NULL, 0.75f, nd, fresh};
        if (!fresh) /* two updates first: the rows read stored moments */
            for (int t = 1; t <= 2; t++) {
                ap.step = t;
                be->ops->adamw_step(be, dp, dg, dm, dv, n, &ap);
            }
        ap.step = fresh ? 1 : 3;
        int32_t *drows = be->ops->alloc(be, sizeof list);
        be->ops->upload(be, drows, list, sizeof list);
        uint16_t *dout = be->ops->alloc(be, N_LIST * COLS * 2), *got = malloc(N_LIST * COLS * 2);
        float *before = malloc(n * 4);
        bt_download(be, before, dp, n);
        be->ops->adamw_rows_bf16(be, dout, dp, dg, dm, dv, drows, N_LIST, COLS, &ap);
        float *after = malloc(n * 4);
        bt_download(be, after, dp, n);
        assert_memory_equal(before, after, n * 4); /* nothing written but out */
        be->ops->download(be, got, dout, N_LIST * COLS * 2);
        uint16_t *db = be->ops->alloc(be, n * 2), *want = malloc(n * 2);
        ap.bf16_out = db;
        be->ops->adamw_step(be, dp, dg, dm, dv, n, &ap);
        be->ops->download(be, want, db, n * 2);
        for (int k = 0; k < N_LIST; k++)
            assert_memory_equal(got + k * COLS, want + (size_t)list[k] * COLS, COLS * 2);
        be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm);
        be->ops->free(be, dv), be->ops->free(be, db), be->ops->free(be, dout);
        be->ops->free(be, drows);
        free(got), free(before), free(after), free(want);
    }
    free(p), free(g), free(nan);
    ft_backend_destroy(be);
}

static void test_sgd_matches_pytorch(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    float p[N_GOLDEN], g[N_GOLDEN];
    golden_p0(p);
    float *dp = bt_upload(be, p, N_GOLDEN), *dg = bt_upload(be, NULL, N_GOLDEN);
    float *dbuf = bt_upload(be, NULL, N_GOLDEN); /* zero: the first step gives buf = g */
    for (int step = 1; step <= 5; step++) {
        golden_grad(g, step);
        be->ops->upload(be, dg, g, sizeof g);
        ft_sgd_params hp = {0.05f, 0.9f, 0.0f, 1.0f, false};
        be->ops->sgd_step(be, dp, dg, dbuf, N_GOLDEN, &hp);
    }
    bt_download(be, p, dp, N_GOLDEN);
    assert_close_each("sgd p", p, torch_sgd_p, N_GOLDEN, 1e-6);
    be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dbuf);
    ft_backend_destroy(be);
}

/* Decoupled decay: p = p (1 - lr wd) - lr buf; momentum 0 needs no buffer. */
static void test_sgd_decoupled_decay(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.5f, 0.25f, -1.0f}, got[3], buf[3];
    float *dp = bt_upload(be, p, 3), *dg = bt_upload(be, g, 3), *dbuf = bt_upload(be, NULL, 3);
    ft_sgd_params hp = {0.5f, 0.5f, 0.5f, 1.0f, false}; /* decay factor 0.75, all exact in binary */
    be->ops->sgd_step(be, dp, dg, dbuf, 3, &hp);
    be->ops->sgd_step(be, dp, dg, dbuf, 3, &hp);
    bt_download(be, got, dp, 3), bt_download(be, buf, dbuf, 3);
    for (int i = 0; i < 3; i++) {
        float p1 = p[i] * 0.75f - 0.5f * g[i];      /* buf = g */
        float p2 = p1 * 0.75f - 0.5f * (1.5f * g[i]); /* buf = 0.5 g + g */
        assert_true(got[i] == p2);
        assert_true(buf[i] == 1.5f * g[i]);
    }
    ft_sgd_params plain = {0.5f, 0.0f, 0.0f, 1.0f, false};
    be->ops->upload(be, dp, p, sizeof p);
    be->ops->sgd_step(be, dp, dg, NULL, 3, &plain);
    bt_download(be, got, dp, 3);
    for (int i = 0; i < 3; i++)
        assert_true(got[i] == p[i] - 0.5f * g[i]);
    be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dbuf);
    ft_backend_destroy(be);
}

/* grad_scale s: the update of g x s is bitwise the update of a buffer scaled by s first
 * (what clipping did before the multiplier reached the kernels), and g stays unscaled;
 * AdamW with and without the bf16 copy, SGD with and without momentum. */
static void test_grad_scale_fused(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(11);
    const size_t n = 40009;
    const float s = 0.3127f; /* g x s rounds: the fused product must round alike */
    float *p = malloc(n * 4), *g = malloc(n * 4), *out[2][3], *g_after = malloc(n * 4);
    uint16_t *bits[2] = {malloc(n * 2), malloc(n * 2)};
    bt_fill_uniform(p, n, &rng, -1, 1);
    bt_fill_uniform(g, n, &rng, -3, 3);
    for (int opt = 0; opt < 4; opt++) { /* adamw, adamw + bits, sgd, sgd + momentum */
        for (int fused = 0; fused < 2; fused++) {
            float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n);
            float *dm = bt_upload(be, NULL, n), *dv = bt_upload(be, NULL, n);
            uint16_t *dbits = be->ops->alloc(be, n * 2);
            for (int t = 1; t <= 2; t++) {
                float *gi = dg;
                if (!fused) { /* the scaling pass, on a copy so that dg stays g */
                    gi = bt_upload(be, g, n);
                    be->ops->scale(be, gi, s, n);
                }
                const float gs = fused ? s : 1.0f;
                if (opt < 2) {
                    ft_adamw_params ap = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t,
                                          opt == 1 ? dbits : NULL, gs, 0, false};
                    be->ops->adamw_step(be, dp, gi, dm, dv, n, &ap);
                } else {
                    ft_sgd_params sp = {0.05f, opt == 3 ? 0.9f : 0.0f, 0.01f, gs, false};
                    be->ops->sgd_step(be, dp, gi, opt == 3 ? dm : NULL, n, &sp);
                }
                if (gi != dg)
                    be->ops->free(be, gi);
            }
            float *bufs[3] = {dp, dm, dv};
            for (int b = 0; b < 3; b++) {
                out[fused][b] = malloc(n * 4);
                bt_download(be, out[fused][b], bufs[b], n);
            }
            be->ops->download(be, bits[fused], dbits, n * 2);
            if (fused) {
                bt_download(be, g_after, dg, n);
                assert_memory_equal(g_after, g, n * 4);
            }
            be->ops->free(be, dp), be->ops->free(be, dg), be->ops->free(be, dm);
            be->ops->free(be, dv), be->ops->free(be, dbits);
        }
        for (int b = 0; b < 3; b++) {
            assert_memory_equal(out[0][b], out[1][b], n * 4);
            free(out[0][b]), free(out[1][b]);
        }
        if (opt == 1)
            assert_memory_equal(bits[0], bits[1], n * 2);
    }
    /* and it is not the identity: scaling changes the result */
    float *dp = bt_upload(be, p, n), *dg = bt_upload(be, g, n), *got = malloc(n * 4);
    ft_sgd_params sp = {0.05f, 0.0f, 0.0f, s, false};
    be->ops->sgd_step(be, dp, dg, NULL, n, &sp);
    bt_download(be, got, dp, n);
    assert_true(got[0] == p[0] - 0.05f * (g[0] * s));
    be->ops->free(be, dp), be->ops->free(be, dg);
    free(p), free(g), free(g_after), free(bits[0]), free(bits[1]), free(got);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_pytorch),
        cmocka_unit_test(test_adamw_matches_double_reference),
        cmocka_unit_test(test_adamw_bf16_out),
        cmocka_unit_test(test_adamw_no_decay_tail),
        cmocka_unit_test(test_moments_zero_unread),
        cmocka_unit_test(test_adamw_rows_are_the_update_bits),
        cmocka_unit_test(test_sgd_matches_pytorch),
        cmocka_unit_test(test_sgd_decoupled_decay),
        cmocka_unit_test(test_grad_scale_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
