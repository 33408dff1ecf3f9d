/* The block's skip_input_grad (block.h): the first block under a frozen embedding
 * (LoRA) does not compute dx. For every family's wiring (sequential, parallel
 * residual, GPT-J's shared norm, Qwen3's qk_norm), a frozen block with adapters on
 * every projection, run once with and once without the flag:
 *   - the adapters' gradients are the same bits (nothing they need was skipped);
 *   - with the flag dx is left as it was and fewer GEMMs ran (the skip happened);
 *   - a block whose weights train computes dx anyway, the bits of the frozen
 *     block's dx (its norms' gradients need it).
 * The model-level agreement of the first block's adapter gradients with a merged
 * model is test_lora's. */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "model/block.h"
#include "model/lora.h"
#include "model/rope_tables.h"
#include "util/rng.h"

enum { BATCH = 2, SEQ = 8, TOKENS = BATCH * SEQ, RANK = 3 };

/* ---- a backend whose matmul counts its calls ---- */

typedef struct counting_backend {
    ft_backend_ops ops;
    const ft_backend_ops *real;
    long matmuls;
} counting_backend;

static counting_backend counting; /* the matmul hook has no context of its own */

static void counting_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a,
                            const void *b, int m, int n, int k, bool trans_a, bool trans_b,
                            float alpha, float beta)
{
    counting.matmuls++;
    counting.real->matmul(be, t, c, a, b, m, n, k, trans_a, trans_b, alpha, beta);
}

/* ---- one block with its adapters, activations and scratch ---- */

typedef struct block_rig {
    ft_backend *be;
    ft_model_config c;
    ft_lora_config lora;
    ft_model_layout base, adapters;
    float *w, *w_grad, *ad, *ad_grad, *x, *dy, *y, *rope_cos, *rope_sin;
    int32_t pos[TOKENS];
    ft_block_acts acts;
    ft_block_scratch scratch;
} block_rig;

static void *alloc_zeroed(void *ctx, size_t bytes)
{
    ft_backend *be = ctx;
    return be->ops->alloc(be, bytes);
}

static float *filled(ft_backend *be, size_t n, uint64_t stream, double std)
{
    float *v = alloc_zeroed(be, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = (float)(std * ft_rng_normal(17, stream, i));
    return v;
}

static void rig_up(block_rig *r, ft_model_config c)
{
    ft_error err;
    memset(r, 0, sizeof *r);
    TEST_CHECK_OK(ft_backend_cpu_create(&r->be, &err), &err);
    counting.real = r->be->ops;
    counting.ops = *r->be->ops;
    counting.ops.matmul = counting_matmul;
    r->be->ops = &counting.ops;
    r->c = c;
    r->lora = (ft_lora_config){ .rank = RANK, .alpha = 2.0 * RANK, .sites = ft_lora_family_sites(&c) };
    TEST_CHECK_OK(ft_model_layout_build(&r->base, &r->c, &err), &err);
    TEST_CHECK_OK(ft_lora_layout_build(&r->adapters, &r->c, &r->lora, &err), &err);
    const size_t wn = r->base.units[ft_layout_block_unit(0)].numel;
    const size_t an = r->adapters.units[0].numel;
    const size_t H = (size_t)c.hidden_size, I = (size_t)c.intermediate_size;
    const size_t Q = (size_t)c.num_attention_heads * c.head_dim;
    const size_t KV = (size_t)c.num_key_value_heads * c.head_dim;
    ft_backend *be = r->be;
    /* random norms and biases too (LayerNorm's bias, Qwen's q/k/v biases) */
    r->w = filled(be, wn, 1, 0.2);
    r->ad = filled(be, an, 2, 0.3); /* B random: a fresh B = 0 hides A's gradient */
    r->w_grad = alloc_zeroed(be, wn * sizeof(float));
    r->ad_grad = alloc_zeroed(be, an * sizeof(float));
    r->x = filled(be, TOKENS * H, 3, 1.0);
    r->dy = filled(be, TOKENS * H, 4, 0.1);
    r->y = alloc_zeroed(be, TOKENS * H * sizeof(float));
    const size_t half = (size_t)ft_model_rot_dim(&c) / 2;
    r->rope_cos = alloc_zeroed(be, SEQ * half * sizeof(float));
    r->rope_sin = alloc_zeroed(be, SEQ * half * sizeof(float));
    ft_rope_tables(&r->c, SEQ, r->rope_cos, r->rope_sin);
    for (int i = 0; i < TOKENS; i++)
        r->pos[i] = i % SEQ;
    assert_int_equal(ft_block_acts_alloc(&r->acts, &r->c, FT_DTYPE_F32, TOKENS, true,
                                         alloc_zeroed, be), 0);
    assert_int_equal(ft_block_lora_acts_alloc(&r->acts, &r->lora, FT_DTYPE_F32, TOKENS,
                                              alloc_zeroed, be), 0);
    ft_block_scratch *s = &r->scratch;
    const size_t f4 = sizeof(float), dim = H > (size_t)c.head_dim ? H : (size_t)c.head_dim;
    s->dh = alloc_zeroed(be, TOKENS * H * f4);
    s->dxn = alloc_zeroed(be, TOKENS * H * f4);
    s->datt = alloc_zeroed(be, TOKENS * Q * f4);
    s->dq = alloc_zeroed(be, TOKENS * Q * f4);
    s->dk = alloc_zeroed(be, TOKENS * KV * f4);
    s->dv = alloc_zeroed(be, TOKENS * KV * f4);
    s->dgate = alloc_zeroed(be, TOKENS * I * f4);
    s->dup = alloc_zeroed(be, TOKENS * I * f4);
    s->dq_raw = alloc_zeroed(be, TOKENS * Q * f4);
    s->dk_raw = alloc_zeroed(be, TOKENS * KV * f4);
    s->lora_du = alloc_zeroed(be, TOKENS * RANK * f4);
    s->grad_sink = alloc_zeroed(be, 2 * dim * f4);
}

static void rig_down(block_rig *r)
{
    ft_backend *be = r->be;
    void *bufs[] = { r->w, r->w_grad, r->ad, r->ad_grad, r->x, r->dy, r->y, r->rope_cos,
                     r->rope_sin };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    void **s = (void **)&r->scratch;
    for (size_t i = 0; i < sizeof r->scratch / sizeof(void *); i++)
        be->ops->free(be, s[i]);
    ft_block_acts_free(be, &r->acts);
    ft_model_layout_free(&r->base);
    ft_model_layout_free(&r->adapters);
    be->ops = counting.real;
    ft_backend_destroy(be);
}

/* Forward, then backward into dx (which the caller filled), with the base frozen or
 * trained; the adapter (and base) gradients start at zero. Returns the GEMMs the
 * backward ran. */
static long run_block(block_rig *r, bool skip_input_grad, bool trained, float *dx)
{
    const ft_block_ctx bc = {
        .be = r->be, .config = &r->c, .dt = FT_DTYPE_F32, .gt = FT_DTYPE_F32,
        .rope_cos = r->rope_cos, .rope_sin = r->rope_sin, .pos = r->pos, .tokens = TOKENS,
        .attn = { .batch = BATCH, .seq_len = SEQ, .n_heads = r->c.num_attention_heads,
                  .n_kv_heads = r->c.num_key_value_heads, .head_dim = r->c.head_dim,
                  .window = r->c.sliding_window },
        .scratch = &r->scratch, .skip_input_grad = skip_input_grad
    };
    const ft_unit_layout *bu = &r->base.units[ft_layout_block_unit(0)];
    const ft_unit_layout *au = &r->adapters.units[0];
    memset(r->w_grad, 0, bu->numel * sizeof(float));
    memset(r->ad_grad, 0, au->numel * sizeof(float));
    ft_block_params p;
    ft_block_grads g;
    ft_lora_params lp;
    ft_lora_grads lg;
    ft_block_params_bind(bu, FT_DTYPE_F32, r->w, &p);
    ft_block_grads_bind(bu, FT_DTYPE_F32, trained ? r->w_grad : NULL, &g);
    ft_lora_params_bind(au, &r->lora, FT_DTYPE_F32, r->ad, &lp);
    ft_lora_grads_bind(au, FT_DTYPE_F32, r->ad_grad, &lg);
    p.lora = &lp;
    g.lora = &lg;
    ft_block_forward(&bc, &p, r->x, r->y, &r->acts);
    const long before = counting.matmuls;
    ft_block_backward(&bc, &p, &g, r->x, &r->acts, r->dy, dx);
    return counting.matmuls - before;
}

static void check_wiring(ft_model_config c)
{
    block_rig r;
    rig_up(&r, c);
    const size_t NH = (size_t)TOKENS * c.hidden_size, an = r.adapters.units[0].numel;
    float *dx_full = calloc(NH, sizeof(float)), *dx_skip = malloc(NH * sizeof(float));
    float *dx_trained = calloc(NH, sizeof(float)), *g_full = malloc(an * sizeof(float));

    const long gemms_full = run_block(&r, false, false, dx_full);
    memcpy(g_full, r.ad_grad, an * sizeof(float));
    const float sentinel = 12345.0f;
    for (size_t i = 0; i < NH; i++)
        dx_skip[i] = sentinel;
    const long gemms_skip = run_block(&r, true, false, dx_skip);

    double norm = 0, dx_norm = 0;
    for (size_t i = 0; i < an; i++)
        norm += (double)g_full[i] * g_full[i];
    for (size_t i = 0; i < NH; i++)
        dx_norm += (double)dx_full[i] * dx_full[i];
    assert_true(norm > 1e-8 && dx_norm > 1e-8); /* the comparisons compare something */
    assert_memory_equal(g_full, r.ad_grad, an * sizeof(float));
    for (size_t i = 0; i < NH; i++)
        if (dx_skip[i] != sentinel)
            fail_msg("dx[%zu] was written (%g) although skip_input_grad is set", i, dx_skip[i]);
    if (!(gemms_skip < gemms_full))
        fail_msg("skip_input_grad ran %ld GEMMs, without it %ld", gemms_skip, gemms_full);

    /* trained norms need dx: the flag is ignored, and dx is the frozen block's */
    const long gemms_trained = run_block(&r, true, true, dx_trained);
    assert_memory_equal(dx_trained, dx_full, NH * sizeof(float));
    assert_memory_equal(g_full, r.ad_grad, an * sizeof(float));
    assert_true(gemms_trained > gemms_full); /* and the base's weight gradients ran */

    free(dx_full);
    free(dx_skip);
    free(dx_trained);
    free(g_full);
    rig_down(&r);
}

static ft_model_config config_of(ft_model_family f)
{
    ft_model_config c = test_tiny_config();
    c.family = f;
    return c;
}

static void test_llama(void **state)
{
    (void)state;
    check_wiring(config_of(FT_FAMILY_LLAMA));
}

static void test_qwen3(void **state) /* qk_norm between q/k and their input gradient */
{
    (void)state;
    ft_model_config c = config_of(FT_FAMILY_QWEN3);
    c.head_dim = 12;
    check_wiring(c);
}

static void test_gpt_neox_parallel(void **state) /* the MLP's dn feeds dx only */
{
    (void)state;
    ft_model_config c = config_of(FT_FAMILY_GPT_NEOX);
    c.num_key_value_heads = c.num_attention_heads;
    c.rotary_dim = 4;
    c.parallel_residual = true;
    c.attention_bias = true;
    check_wiring(c);
}

static void test_gpt_neox_sequential(void **state) /* LayerNorm, sequential residual */
{
    (void)state;
    ft_model_config c = config_of(FT_FAMILY_GPT_NEOX);
    c.num_key_value_heads = c.num_attention_heads;
    c.rotary_dim = 4;
    check_wiring(c);
}

static void test_gptj(void **state) /* one norm for both branches */
{
    (void)state;
    ft_model_config c = config_of(FT_FAMILY_GPTJ);
    c.num_key_value_heads = c.num_attention_heads;
    c.rotary_dim = 4;
    c.gelu_tanh = true;
    check_wiring(c);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gpt_neox_parallel),
        cmocka_unit_test(test_gpt_neox_sequential),
        cmocka_unit_test(test_gptj),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
