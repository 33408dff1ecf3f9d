/* LoRA dropout in the model (model/lora.h): with p > 0 a training pass computes
 * u = drop(a) A^T, and since the mask is a deterministic function of (run seed, layer,
 * site, token's global number, column), the loss of a training pass is a smooth
 * function of the adapters for a fixed first_sample. So, for Llama (q, k, v apart:
 * independent masks) and GPT-NeoX (the fused query_key_value, one mask over q, k, v):
 *   - the adapters' gradients equal central differences of that loss, as directional
 *     derivatives along random directions over each A and each B of every layer
 *     (through the masks in dA and, for the first layer's adapters, through the second
 *     layer's drop(du A) in the input gradient): a backward without the mask fails;
 *   - the training loss differs from the same model's without dropout, while
 *     evaluation and logits are exactly those of the model without dropout;
 *   - the masks follow the samples: rows 10 and 11 in one micro-batch, or one row each
 *     in two micro-batches (first_sample 10 and 11), give the same losses and
 *     gradients; first_sample 12 for the second row gives another loss;
 *   - activation checkpointing (the forward recomputed in the backward) changes no bit.
 * The sources are host arrays on the CPU backend (no engine, no collective). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/host_source.h"
#include "../common/test_env.h"
#include "model/init.h"
#include "model/lora.h"
#include "util/rng.h"


#define P_DROP 0.4
#define SEED 1234

typedef struct rig {
    ft_backend *be;
    ft_model_config c;
    ft_lora_config lora, lora_off;
    ft_model_layout base, adapters;
    float **base_p, **ad_p, **ad_g;
    host_src bs, as;
} rig;

static void rig_up(rig *r, ft_model_family fam)
{
    ft_error err;
    memset(r, 0, sizeof *r);
    TEST_CHECK_OK(ft_backend_cpu_create(&r->be, &err), &err);
    r->c = test_tiny_config();
    r->c.family = fam;
    if (fam == FT_FAMILY_GPT_NEOX) {
        r->c.num_key_value_heads = r->c.num_attention_heads;
        r->c.rotary_dim = 4;
        r->c.parallel_residual = true;
        r->c.attention_bias = true;
    }
    unsigned sites = 0;
    for (int i = 0; i < FT_LORA_N_SITES; i++)
        if (ft_lora_site_hf_name(&r->c, (ft_lora_site)i))
            sites |= 1u << i;
    r->lora = (ft_lora_config){ .rank = 3, .alpha = 6.0, .dropout = P_DROP, .sites = sites };
    r->lora_off = r->lora;
    r->lora_off.dropout = 0.0;
    TEST_CHECK_OK(ft_model_layout_build(&r->base, &r->c, &err), &err);
    TEST_CHECK_OK(ft_lora_layout_build(&r->adapters, &r->c, &r->lora, &err), &err);
    r->base_p = alloc_units(&r->base);
    r->ad_p = alloc_units(&r->adapters);
    r->ad_g = alloc_units(&r->adapters);
    for (int u = 0; u < r->base.n_units; u++)
        ft_model_init_range(&r->base.units[u], 0, r->base.units[u].numel, 5, 0.2, r->base_p[u]);
    for (int u = 0; u < r->adapters.n_units; u++) /* B random too: B = 0 hides dA */
        for (size_t i = 0; i < r->adapters.units[u].numel; i++)
            r->ad_p[u][i] = (float)(0.15 * ft_rng_normal(11, 200 + (uint64_t)u, i));
    r->bs = (host_src){ .params = r->base_p };
    r->as = (host_src){ .params = r->ad_p, .grads = r->ad_g };
}

static void rig_down(rig *r)
{
    free_units(&r->base, r->base_p);
    free_units(&r->adapters, r->ad_p);
    free_units(&r->adapters, r->ad_g);
    ft_model_layout_free(&r->base);
    ft_model_layout_free(&r->adapters);
    ft_backend_destroy(r->be);
}

/* ckpt: 0 none, 1 activation checkpointing, 2 also keeping the attention parts, 3
 * keeping attention's output */
static ft_model *model_of(rig *r, const ft_lora_config *lora, int ckpt)
{
    ft_error err;
    ft_model *m;
    ft_model_options mo = { .max_batch = 2, .seq_len = 16, .activation_checkpointing = ckpt,
                            .checkpoint_keep = ckpt == 2 ? FT_CKPT_KEEP_ATTENTION
                                             : ckpt == 3 ? FT_CKPT_KEEP_ATTENTION_OUTPUT
                                                         : FT_CKPT_KEEP_NOTHING,
                            .head_group_rows = 8, .head_chunk_rows = 5, .lora = lora,
                            .adapter_layout = &r->adapters, .lora_dropout_seed = SEED };
    TEST_CHECK_OK(ft_model_create(&m, &r->base, r->be, &mo, &err), &err);
    ft_param_source as = source_of(&r->as);
    ft_model_set_adapters(m, &as);
    return m;
}

enum { T = 16, W = T + 1 };

typedef struct rows {
    uint32_t tokens[2 * W];
    uint8_t mask[2 * W];
} rows;

static void rows_fill(rows *x, int V)
{
    for (int i = 0; i < 2 * W; i++) {
        x->tokens[i] = (uint32_t)(ft_rng_u64(9, 3, (uint64_t)i) % (uint64_t)V);
        x->mask[i] = i % W > 0;
    }
}

/* Row `first` .. first + n - 1 of x as a micro-batch of samples first_sample... */
static ft_host_batch batch(rows *x, int first, int n, int64_t first_sample)
{
    return (ft_host_batch){ .batch = n, .seq_len = T, .tokens = x->tokens + first * W,
                            .loss_mask = x->mask + first * W, .first_sample = first_sample };
}

static double train(rig *r, ft_model *m, const ft_host_batch *b)
{
    ft_error err;
    double loss;
    long nt;
    ft_param_source bs = source_of(&r->bs);
    TEST_CHECK_OK(ft_model_train_micro(m, &bs, b, 1.0f, &loss, &nt, &err), &err);
    return loss;
}

/* Directional derivatives of the training loss along random directions over each
 * adapter tensor against the backward's gradient. */
static void check_gradients(rig *r, ft_model *m, const ft_host_batch *b)
{
    zero_units(&r->adapters, r->ad_g);
    train(r, m, b);
    float **g = alloc_units(&r->adapters);
    for (int u = 0; u < r->adapters.n_units; u++)
        memcpy(g[u], r->ad_g[u], r->adapters.units[u].numel * sizeof(float));
    const double h = 1e-2;
    for (int u = 0; u < r->adapters.n_units; u++)
        for (int t = 0; t < r->adapters.units[u].n_tensors; t++) {
            const ft_tensor_info *ti = &r->adapters.units[u].tensors[t];
            float *p = r->ad_p[u] + ti->offset;
            float *saved = malloc(ti->numel * sizeof(float));
            memcpy(saved, p, ti->numel * sizeof(float));
            double analytic = 0, norm = 0;
            double *dir = malloc(ti->numel * sizeof(double));
            for (size_t i = 0; i < ti->numel; i++) {
                dir[i] = ft_rng_uniform(31, (uint64_t)(u * 64 + t), i) < 0.5 ? -1.0 : 1.0;
                analytic += dir[i] * g[u][ti->offset + i];
                norm += (double)g[u][ti->offset + i] * g[u][ti->offset + i];
            }
            double l[2];
            for (int s = 0; s < 2; s++) {
                for (size_t i = 0; i < ti->numel; i++)
                    p[i] = (float)(saved[i] + (s ? -h : h) * dir[i]);
                l[s] = train(r, m, b);
            }
            memcpy(p, saved, ti->numel * sizeof(float));
            const double fd = (l[0] - l[1]) / (2 * h);
            const double tol = 1e-2 * (fabs(analytic) + sqrt(norm * (double)ti->numel)) + 1e-3;
            if (fabs(fd - analytic) > tol)
                fail_msg("%s: directional derivative %.6g, finite difference %.6g", ti->name,
                         analytic, fd);
            assert_true(norm > 1e-8);
            free(dir);
            free(saved);
        }
    free_units(&r->adapters, g);
}

static void check_family(ft_model_family fam)
{
    rig r;
    rig_up(&r, fam);
    ft_error err;
    rows x;
    rows_fill(&x, r.c.vocab_size);
    const ft_host_batch both = batch(&x, 0, 2, 10);
    ft_model *m = model_of(&r, &r.lora, 0), *off = model_of(&r, &r.lora_off, 0);

    check_gradients(&r, m, &both);

    /* dropout trains, and only trains */
    assert_true(train(&r, m, &both) != train(&r, off, &both));
    ft_param_source bs = source_of(&r.bs);
    const size_t NV = (size_t)2 * T * r.c.vocab_size;
    float *lg = malloc(NV * sizeof(float)), *lg_off = malloc(NV * sizeof(float));
    TEST_CHECK_OK(ft_model_logits(m, &bs, &both, lg, &err), &err);
    TEST_CHECK_OK(ft_model_logits(off, &bs, &both, lg_off, &err), &err);
    assert_memory_equal(lg, lg_off, NV * sizeof(float));
    double e, e_off;
    long nt;
    TEST_CHECK_OK(ft_model_eval_micro(m, &bs, &both, &e, &nt, &err), &err);
    TEST_CHECK_OK(ft_model_eval_micro(off, &bs, &both, &e_off, &nt, &err), &err);
    assert_true(e == e_off);

    /* the masks follow the samples, not the micro-batch */
    zero_units(&r.adapters, r.ad_g);
    const double l_both = train(&r, m, &both);
    float **g_both = alloc_units(&r.adapters);
    for (int u = 0; u < r.adapters.n_units; u++)
        memcpy(g_both[u], r.ad_g[u], r.adapters.units[u].numel * sizeof(float));
    zero_units(&r.adapters, r.ad_g);
    const ft_host_batch first = batch(&x, 0, 1, 10), second = batch(&x, 1, 1, 11);
    const double l_split = train(&r, m, &first) + train(&r, m, &second);
    if (fabs(l_split - l_both) > 1e-5 * fabs(l_both))
        fail_msg("one micro-batch: loss %.9g; two: %.9g", l_both, l_split);
    for (int u = 0; u < r.adapters.n_units; u++)
        for (size_t i = 0; i < r.adapters.units[u].numel; i++)
            if (fabs(r.ad_g[u][i] - g_both[u][i]) > 1e-5 * (1 + fabs(g_both[u][i])))
                fail_msg("unit %d element %zu: gradient %.9g in one micro-batch, %.9g in two", u,
                         i, g_both[u][i], r.ad_g[u][i]);
    const ft_host_batch elsewhere = batch(&x, 1, 1, 12);
    assert_true(fabs(train(&r, m, &first) + train(&r, m, &elsewhere) - l_both) >
                1e-4 * fabs(l_both));

    /* activation checkpointing, keeping nothing, the attention parts or attention's
     * output: the same bits */
    for (int ckpt = 1; ckpt <= 3; ckpt++) {
        ft_model *mc = model_of(&r, &r.lora, ckpt);
        zero_units(&r.adapters, r.ad_g);
        assert_true(train(&r, mc, &both) == l_both);
        for (int u = 0; u < r.adapters.n_units; u++)
            assert_memory_equal(r.ad_g[u], g_both[u], r.adapters.units[u].numel * sizeof(float));
        ft_model_free(mc);
    }

    free_units(&r.adapters, g_both);
    free(lg);
    free(lg_off);
    ft_model_free(off);
    ft_model_free(m);
    rig_down(&r);
}

static void test_llama(void **state) { (void)state; check_family(FT_FAMILY_LLAMA); }
static void test_gpt_neox(void **state) { (void)state; check_family(FT_FAMILY_GPT_NEOX); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_gpt_neox),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
