/* LoRA in the block against the merged model, for every family.
 *
 * With W' = W + s B A for each targeted projection, the LoRA model computes exactly
 * the function of a plain model with weights W', so
 *   - its loss and logits equal the merged model's;
 *   - by the chain rule through W' = W + s B A, its adapter gradients are
 *       dB = s dW' A^T   and   dA = s B^T dW'
 *     (gpt_neox's fused site: the sums over its q, k and v rows), where dW' is the
 *     merged model's weight gradient;
 *   - activation checkpointing changes no bit;
 *   - the frozen base is never asked for a gradient, and its embedding is not
 *     acquired for a backward.
 * The sources here are plain host arrays (the CPU backend's memory is host memory),
 * so no engine and no MPI collective is involved. */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/host_source.h"
#include "../common/test_env.h"
#include "generate/decoder.h"
#include "model/init.h"
#include "model/lora.h"
#include "util/rng.h"

/* ---- the cases ---- */

static ft_model_config family_config(ft_model_family f)
{
    ft_model_config c = test_tiny_config();
    c.family = f;
    switch (f) {
    case FT_FAMILY_MISTRAL: c.sliding_window = 5; break;
    case FT_FAMILY_QWEN3: c.head_dim = 12; break; /* head_dim != hidden / heads */
    case FT_FAMILY_GPT_NEOX:
        c.num_key_value_heads = c.num_attention_heads; /* no GQA in NeoX */
        c.rotary_dim = 4;
        c.parallel_residual = true;
        c.attention_bias = true;
        break;
    case FT_FAMILY_GPTJ:
        c.num_key_value_heads = c.num_attention_heads;
        c.rotary_dim = 4;
        c.gelu_tanh = true;
        break;
    default: break;
    }
    return c;
}

/* The base tensor (block slot) fed by rows [row0, row0 + out) of a site's B. */
typedef struct site_part {
    int slot;
    long long row0, out;
} site_part;

static int parts_of(const ft_model_config *c, ft_lora_site s, site_part *p)
{
    long long in, out;
    ft_lora_site_dims(c, s, &in, &out);
    if (s != FT_LORA_QKV) {
        p[0] = (site_part){ (int)s, 0, out };
        return 1;
    }
    const long long q = (long long)c->num_attention_heads * c->head_dim;
    const long long kv = (long long)c->num_key_value_heads * c->head_dim;
    p[0] = (site_part){ FT_BLK_Q, 0, q };
    p[1] = (site_part){ FT_BLK_K, q, kv };
    p[2] = (site_part){ FT_BLK_V, q + kv, kv };
    return 3;
}

typedef struct lora_rig {
    ft_backend *be;
    ft_model_config c;
    ft_lora_config lora;
    ft_model_layout base, adapters;
    float **base_p, **merged_p, **merged_g, **ad_p, **ad_g;
} lora_rig;

static float randn(uint64_t stream, uint64_t i, double std)
{
    return (float)(std * ft_rng_normal(11, stream, i));
}

static void rig_up(lora_rig *r, ft_model_family fam, int rank)
{
    ft_error err;
    memset(r, 0, sizeof *r);
    TEST_CHECK_OK(ft_backend_cpu_create(&r->be, &err), &err);
    r->c = family_config(fam);
    r->lora = (ft_lora_config){ .rank = rank, .alpha = 3.0 * rank, .sites = ft_lora_family_sites(&r->c) };
    TEST_CHECK_OK(ft_model_layout_build(&r->base, &r->c, &err), &err);
    TEST_CHECK_OK(ft_lora_layout_build(&r->adapters, &r->c, &r->lora, &err), &err);
    r->base_p = alloc_units(&r->base);
    r->merged_p = alloc_units(&r->base);
    r->merged_g = alloc_units(&r->base);
    r->ad_p = alloc_units(&r->adapters);
    r->ad_g = alloc_units(&r->adapters);
    for (int u = 0; u < r->base.n_units; u++) {
        ft_model_init_range(&r->base.units[u], 0, r->base.units[u].numel, 5, 0.2, r->base_p[u]);
        /* biases random too, so that their place before the adapter's term matters */
        for (int t = 0; t < r->base.units[u].n_tensors; t++) {
            const ft_tensor_info *ti = &r->base.units[u].tensors[t];
            if (strstr(ti->name, ".bias"))
                for (size_t i = 0; i < ti->numel; i++)
                    r->base_p[u][ti->offset + i] = randn(100 + (uint64_t)u, i, 0.1);
        }
    }
    /* A and B both random: a fresh B = 0 would hide every term of B A */
    for (int u = 0; u < r->adapters.n_units; u++)
        for (size_t i = 0; i < r->adapters.units[u].numel; i++)
            r->ad_p[u][i] = randn(200 + (uint64_t)u, i, 0.15);
    /* W' = W + s B A */
    const float s = ft_lora_scale(&r->lora);
    for (int u = 0; u < r->base.n_units; u++)
        memcpy(r->merged_p[u], r->base_p[u], r->base.units[u].numel * sizeof(float));
    for (int l = 0; l < r->c.num_hidden_layers; l++) {
        const ft_unit_layout *bu = &r->base.units[ft_layout_block_unit(l)];
        const ft_unit_layout *au = &r->adapters.units[l];
        float *w = r->merged_p[ft_layout_block_unit(l)];
        for (int st = 0; st < FT_LORA_N_SITES; st++) {
            if (au->slot[FT_LORA_SLOT_A(st)] < 0)
                continue;
            long long in, out;
            ft_lora_site_dims(&r->c, (ft_lora_site)st, &in, &out);
            const float *A = r->ad_p[l] + au->tensors[au->slot[FT_LORA_SLOT_A(st)]].offset;
            const float *B = r->ad_p[l] + au->tensors[au->slot[FT_LORA_SLOT_B(st)]].offset;
            site_part parts[3];
            const int np = parts_of(&r->c, (ft_lora_site)st, parts);
            for (int k = 0; k < np; k++) {
                float *W = w + bu->tensors[bu->slot[parts[k].slot]].offset;
                for (long long o = 0; o < parts[k].out; o++)
                    for (long long i = 0; i < in; i++) {
                        double acc = 0;
                        for (int j = 0; j < rank; j++)
                            acc += (double)B[(parts[k].row0 + o) * rank + j] * A[j * in + i];
                        W[o * in + i] += (float)(s * acc);
                    }
            }
        }
    }
}

static void rig_down(lora_rig *r)
{
    free_units(&r->base, r->base_p);
    free_units(&r->base, r->merged_p);
    free_units(&r->base, r->merged_g);
    free_units(&r->adapters, r->ad_p);
    free_units(&r->adapters, r->ad_g);
    ft_model_layout_free(&r->base);
    ft_model_layout_free(&r->adapters);
    ft_backend_destroy(r->be);
}

typedef struct rows {
    int B, T;
    uint32_t tokens[2 * 17];
    uint8_t mask[2 * 17];
    int32_t segment[2 * 17];
} rows;

static ft_host_batch batch_of(rows *x, int V)
{
    x->B = 2;
    x->T = 16;
    for (int i = 0; i < x->B * (x->T + 1); i++) {
        const int col = i % (x->T + 1);
        x->tokens[i] = (uint32_t)(ft_rng_u64(9, 3, (uint64_t)i) % (uint64_t)V);
        x->mask[i] = col > 0 && ft_rng_uniform(9, 4, (uint64_t)i) < 0.85;
        x->segment[i] = i >= x->T + 1 && col >= 7 ? 1 : 0; /* row 1: two documents */
        if (i >= x->T + 1 && col == 7)
            x->mask[i] = 0;
    }
    return (ft_host_batch){ .batch = x->B, .seq_len = x->T, .tokens = x->tokens,
                            .loss_mask = x->mask, .segment = x->segment };
}

/* ckpt: 0 none, 1 activation checkpointing, 2 also keeping the attention parts, 3
 * keeping attention's output */
static ft_model *lora_model(lora_rig *r, int ckpt, host_src *ad)
{
    ft_error err;
    ft_model *m;
    ft_model_options mo = { .max_batch = 2, .seq_len = 16, .activation_checkpointing = ckpt,
                            .checkpoint_keep = ckpt == 2 ? FT_CKPT_KEEP_ATTENTION
                                             : ckpt == 3 ? FT_CKPT_KEEP_ATTENTION_OUTPUT
                                                         : FT_CKPT_KEEP_NOTHING,
                            .head_group_rows = 8, .head_chunk_rows = 5, .lora = &r->lora,
                            .adapter_layout = &r->adapters };
    TEST_CHECK_OK(ft_model_create(&m, &r->base, r->be, &mo, &err), &err);
    ft_param_source as = source_of(ad);
    ft_model_set_adapters(m, &as);
    return m;
}

static void assert_close(const char *what, double got, double want, double tol)
{
    if (fabs(got - want) > tol * (1.0 + fabs(want)))
        fail_msg("%s: %.9g, expected %.9g", what, got, want);
}

/* Runs the LoRA model and the merged model on one batch and checks loss, logits and
 * the chain rule; returns the adapter gradients' sum of squares (nonzero check). */
static void check_family(ft_model_family fam)
{
    lora_rig r;
    rig_up(&r, fam, 3);
    ft_error err;
    rows x;
    ft_host_batch b = batch_of(&x, r.c.vocab_size);

    host_src base = { .layout = &r.base, .params = r.base_p };
    host_src ad = { .layout = &r.adapters, .params = r.ad_p, .grads = r.ad_g };
    ft_model *m = lora_model(&r, 0, &ad);
    ft_param_source bs = source_of(&base);
    double loss_lora, loss_merged;
    long nt;
    TEST_CHECK_OK(ft_model_train_micro(m, &bs, &b, 1.0f, &loss_lora, &nt, &err), &err);
    assert_int_equal(base.acquires_after_head, 0);

    const size_t NV = (size_t)2 * 16 * r.c.vocab_size;
    float *logits_lora = malloc(NV * sizeof(float)), *logits_merged = malloc(NV * sizeof(float));
    TEST_CHECK_OK(ft_model_logits(m, &bs, &b, logits_lora, &err), &err);

    /* the merged model, trained in full */
    ft_model *mm;
    ft_model_options mo = { .max_batch = 2, .seq_len = 16, .head_group_rows = 8,
                            .head_chunk_rows = 5 };
    TEST_CHECK_OK(ft_model_create(&mm, &r.base, r.be, &mo, &err), &err);
    host_src merged = { .layout = &r.base, .params = r.merged_p, .grads = r.merged_g };
    ft_param_source ms = source_of(&merged);
    TEST_CHECK_OK(ft_model_train_micro(mm, &ms, &b, 1.0f, &loss_merged, &nt, &err), &err);
    TEST_CHECK_OK(ft_model_logits(mm, &ms, &b, logits_merged, &err), &err);
    assert_close("loss", loss_lora, loss_merged, 1e-5);
    for (size_t i = 0; i < NV; i++)
        assert_close("logit", logits_lora[i], logits_merged[i], 2e-5);

    /* dB = s dW' A^T, dA = s sum_parts B_part^T dW'_part */
    const float s = ft_lora_scale(&r.lora);
    const int R = r.lora.rank;
    double norm = 0;
    for (int l = 0; l < r.c.num_hidden_layers; l++) {
        const ft_unit_layout *bu = &r.base.units[ft_layout_block_unit(l)];
        const ft_unit_layout *au = &r.adapters.units[l];
        for (int st = 0; st < FT_LORA_N_SITES; st++) {
            if (au->slot[FT_LORA_SLOT_A(st)] < 0)
                continue;
            long long in, out;
            ft_lora_site_dims(&r.c, (ft_lora_site)st, &in, &out);
            const size_t oa = au->tensors[au->slot[FT_LORA_SLOT_A(st)]].offset;
            const size_t ob = au->tensors[au->slot[FT_LORA_SLOT_B(st)]].offset;
            const float *A = r.ad_p[l] + oa, *B = r.ad_p[l] + ob;
            const float *dA = r.ad_g[l] + oa, *dB = r.ad_g[l] + ob;
            double *wantA = calloc((size_t)(R * in), sizeof(double));
            site_part parts[3];
            const int np = parts_of(&r.c, (ft_lora_site)st, parts);
            for (int k = 0; k < np; k++) {
                const float *dW =
                    r.merged_g[ft_layout_block_unit(l)] + bu->tensors[bu->slot[parts[k].slot]].offset;
                for (long long o = 0; o < parts[k].out; o++)
                    for (int j = 0; j < R; j++) {
                        double acc = 0;
                        for (long long i = 0; i < in; i++)
                            acc += (double)dW[o * in + i] * A[j * in + i];
                        assert_close("dB", dB[(parts[k].row0 + o) * R + j], s * acc, 1e-4);
                        norm += acc * acc;
                    }
                for (int j = 0; j < R; j++)
                    for (long long i = 0; i < in; i++)
                        for (long long o = 0; o < parts[k].out; o++)
                            wantA[j * in + i] +=
                                s * (double)B[(parts[k].row0 + o) * R + j] * dW[o * in + i];
            }
            for (long long i = 0; i < R * in; i++)
                assert_close("dA", dA[i], wantA[i], 1e-4);
            free(wantA);
        }
    }
    assert_true(norm > 1e-8); /* the comparison compared something */

    /* activation checkpointing, keeping nothing, the attention parts (the q, k, v sites'
     * u among them) or attention's output: the same bits */
    float **g1 = alloc_units(&r.adapters);
    for (int u = 0; u < r.adapters.n_units; u++)
        memcpy(g1[u], r.ad_g[u], r.adapters.units[u].numel * sizeof(float));
    for (int ckpt = 1; ckpt <= 3; ckpt++) {
        zero_units(&r.adapters, r.ad_g);
        ft_model *mc = lora_model(&r, ckpt, &ad);
        double loss_ckpt;
        TEST_CHECK_OK(ft_model_train_micro(mc, &bs, &b, 1.0f, &loss_ckpt, &nt, &err), &err);
        assert_true(loss_ckpt == loss_lora);
        for (int u = 0; u < r.adapters.n_units; u++)
            assert_memory_equal(g1[u], r.ad_g[u], r.adapters.units[u].numel * sizeof(float));
        ft_model_free(mc);
    }

    free_units(&r.adapters, g1);
    free(logits_lora);
    free(logits_merged);
    ft_model_free(mm);
    ft_model_free(m);
    rig_down(&r);
}

/* The KV-cache decoder with the adapters attached gives the LoRA model's logits: the
 * prompt's first 9 tokens as one chunk, then one token at a time (the cache path). */
static void check_decoder(ft_model_family fam)
{
    lora_rig r;
    rig_up(&r, fam, 3);
    ft_error err;
    rows x;
    ft_host_batch b = batch_of(&x, r.c.vocab_size);
    b.batch = 1; /* row 0: one document */
    b.segment = NULL;
    host_src base = { .layout = &r.base, .params = r.base_p };
    host_src ad = { .layout = &r.adapters, .params = r.ad_p, .grads = r.ad_g };
    ft_model *m = lora_model(&r, 0, &ad);
    ft_param_source bs = source_of(&base);
    const int T = 16, V = r.c.vocab_size;
    float *want = malloc((size_t)T * V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
    TEST_CHECK_OK(ft_model_logits(m, &bs, &b, want, &err), &err);

    ft_decoder *d;
    const ft_decoder_options dopt = { .capacity = T, .max_chunk = 9, .dtype = FT_DTYPE_F32 };
    TEST_CHECK_OK(ft_decoder_create(&d, &r.base, r.be, &bs, &dopt, &err), &err);
    const ft_lora_adapters adapters = { &r.adapters, &r.lora, source_of(&ad) };
    TEST_CHECK_OK(ft_decoder_set_adapters(d, &adapters, &err), &err);
    int32_t ids[16];
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)x.tokens[i];
    TEST_CHECK_OK(ft_decoder_append(d, ids, 9, got, &err), &err);
    for (int v = 0; v < V; v++)
        assert_close("prefill logit", got[v], want[(size_t)8 * V + v], 2e-5);
    for (int t = 9; t < T; t++) {
        TEST_CHECK_OK(ft_decoder_append(d, ids + t, 1, got, &err), &err);
        for (int v = 0; v < V; v++)
            assert_close("decode logit", got[v], want[(size_t)t * V + v], 2e-5);
    }
    ft_decoder_free(d);
    free(want);
    free(got);
    ft_model_free(m);
    rig_down(&r);
}

static void test_decoder_llama(void **state) { (void)state; check_decoder(FT_FAMILY_LLAMA); }
static void test_decoder_neox(void **state) { (void)state; check_decoder(FT_FAMILY_GPT_NEOX); }

static void test_llama(void **state) { (void)state; check_family(FT_FAMILY_LLAMA); }
static void test_qwen2(void **state) { (void)state; check_family(FT_FAMILY_QWEN2); }
static void test_qwen3(void **state) { (void)state; check_family(FT_FAMILY_QWEN3); }
static void test_mistral(void **state) { (void)state; check_family(FT_FAMILY_MISTRAL); }
static void test_gpt_neox(void **state) { (void)state; check_family(FT_FAMILY_GPT_NEOX); }
static void test_gptj(void **state) { (void)state; check_family(FT_FAMILY_GPTJ); }

/* Targets by HF name: the family's names resolve, others are refused naming the
 * family's list; the adapter layout has A [r, in] and B [out, r] per site. */
static void test_resolve_and_layout(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config neox = family_config(FT_FAMILY_GPT_NEOX);
    char *good[] = { "query_key_value", "dense_4h_to_h", NULL };
    ft_lora_config lc;
    assert_int_equal(ft_lora_resolve(&neox, 8, 16.0, 0.0, good, &lc, &err), 0);
    assert_int_equal(lc.sites, (1u << FT_LORA_QKV) | (1u << FT_LORA_DOWN));
    char *bad[] = { "q_proj", NULL };
    assert_int_not_equal(ft_lora_resolve(&neox, 8, 16.0, 0.0, bad, &lc, &err), 0);
    assert_non_null(strstr(err.msg, "\"q_proj\" is not a projection of a gpt_neox model"));
    assert_non_null(strstr(err.msg, "query_key_value, dense, dense_h_to_4h, dense_4h_to_h"));

    ft_model_config c = family_config(FT_FAMILY_LLAMA);
    char *t[] = { "v_proj", "down_proj", NULL };
    assert_int_equal(ft_lora_resolve(&c, 4, 8.0, 0.0, t, &lc, &err), 0);
    ft_model_layout l;
    TEST_CHECK_OK(ft_lora_layout_build(&l, &c, &lc, &err), &err);
    assert_int_equal(l.n_units, c.num_hidden_layers);
    const ft_unit_layout *u = &l.units[1];
    assert_int_equal(u->n_tensors, 4);
    assert_string_equal(u->tensors[0].name, "model.layers.1.self_attn.v_proj.lora_A.weight");
    assert_int_equal(u->tensors[0].shape[0], 4);
    assert_int_equal(u->tensors[0].shape[1], c.hidden_size);
    assert_string_equal(u->tensors[1].name, "model.layers.1.self_attn.v_proj.lora_B.weight");
    assert_int_equal(u->tensors[1].shape[0], c.num_key_value_heads * c.head_dim);
    assert_string_equal(u->tensors[3].name, "model.layers.1.mlp.down_proj.lora_B.weight");
    assert_int_equal(u->decay_numel, u->numel);
    char path[96];
    ft_lora_site_hf_path(&neox, FT_LORA_QKV, 3, path, sizeof path);
    assert_string_equal(path, "gpt_neox.layers.3.attention.query_key_value");

    /* initialisation: A within +-1/sqrt(in), not constant; B zero */
    float *v = malloc(u->numel * sizeof(float));
    ft_model_init_range(u, 0, u->numel, 42, 0.02, v);
    const float bound = 1.0f / sqrtf((float)c.hidden_size);
    float lo = 1, hi = -1;
    for (size_t i = 0; i < u->tensors[0].numel; i++) {
        lo = fminf(lo, v[i]);
        hi = fmaxf(hi, v[i]);
    }
    assert_true(lo >= -bound && hi <= bound && hi - lo > bound);
    for (size_t i = 0; i < u->tensors[1].numel; i++)
        assert_true(v[u->tensors[1].offset + i] == 0.0f);
    free(v);
    ft_model_layout_free(&l);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_and_layout), cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen2),              cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_mistral),            cmocka_unit_test(test_gpt_neox),
        cmocka_unit_test(test_gptj),              cmocka_unit_test(test_decoder_llama),
        cmocka_unit_test(test_decoder_neox),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
