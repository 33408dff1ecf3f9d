/* ft_lora_merge_block against a naive reference: for every targeted site,
 *     W[i][j] += (alpha / rank) sum_r B[i][r] A[r][j],
 * with the base tensors found by name (not through the slots the merge uses) and, for
 * GPT-NeoX's fused site, B's row i landing in q_proj (i < q), k_proj (i < q + kv) or
 * v_proj by the row arithmetic of model/lora.h's "q rows, then k, then v". Every other
 * element of the block (norms, biases, untargeted weights) must be bitwise unchanged.
 * Also: a base of another shape is refused with a line naming the tensors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "model/lora_merge.h"

static float pseudo(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static const float *find(const ft_unit_layout *u, const float *flat, const char *name)
{
    for (int t = 0; t < u->n_tensors; t++)
        if (strcmp(u->tensors[t].name, name) == 0)
            return flat + u->tensors[t].offset;
    return NULL;
}

/* The reference merge of one site into ref (a copy of the base unit). */
static void reference_site(const ft_model_config *c, const ft_unit_layout *bu, float *ref,
                           const ft_unit_layout *au, const float *ad, ft_lora_site s, int rank,
                           float scale)
{
    static const char *const targets[FT_LORA_N_SITES] = {
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", NULL,
    };
    char path[80], name[120];
    ft_lora_site_path(s, bu->layer, path, sizeof path);
    snprintf(name, sizeof name, "%s.lora_A.weight", path);
    const float *A = find(au, ad, name);
    snprintf(name, sizeof name, "%s.lora_B.weight", path);
    const float *B = find(au, ad, name);
    assert_non_null(A);
    assert_non_null(B);
    long long in, out;
    ft_lora_site_dims(c, s, &in, &out);
    const long long q = (long long)c->num_attention_heads * c->head_dim;
    const long long kv = (long long)c->num_key_value_heads * c->head_dim;
    for (long long i = 0; i < out; i++) {
        const char *t = targets[s];
        long long row = i;
        if (s == FT_LORA_QKV) {
            t = i < q ? "self_attn.q_proj" : i < q + kv ? "self_attn.k_proj" : "self_attn.v_proj";
            row = i < q ? i : i < q + kv ? i - q : i - q - kv;
        }
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", bu->layer, t);
        float *W = (float *)find(bu, ref, name);
        assert_non_null(W);
        for (long long j = 0; j < in; j++) {
            double acc = 0;
            for (int r = 0; r < rank; r++)
                acc += (double)B[i * rank + r] * A[r * in + j];
            W[row * in + j] += (float)(scale * acc);
        }
    }
}

static void check_family(ft_model_config c, char *const *targets, int rank, double alpha)
{
    ft_error err;
    ft_lora_config lora;
    assert_int_equal(ft_lora_resolve(&c, rank, alpha, 0.0, targets, &lora, &err), 0);
    ft_model_layout base, ad;
    assert_int_equal(ft_model_layout_build(&base, &c, &err), 0);
    assert_int_equal(ft_lora_layout_build(&ad, &c, &lora, &err), 0);
    unsigned st = 12345;
    for (int l = 0; l < c.num_hidden_layers; l++) {
        const ft_unit_layout *bu = &base.units[ft_layout_block_unit(l)], *au = &ad.units[l];
        float *w = malloc(bu->numel * sizeof *w), *ref = malloc(bu->numel * sizeof *ref);
        float *a = malloc(au->numel * sizeof *a);
        assert_non_null(w);
        assert_non_null(ref);
        assert_non_null(a);
        for (size_t i = 0; i < bu->numel; i++)
            ref[i] = w[i] = pseudo(&st);
        for (size_t i = 0; i < au->numel; i++)
            a[i] = pseudo(&st); /* B non-zero too: a zero B would merge to nothing */
        for (int s = 0; s < FT_LORA_N_SITES; s++)
            if (ft_lora_has_site(&lora, (ft_lora_site)s))
                reference_site(&c, bu, ref, au, a, (ft_lora_site)s, rank, ft_lora_scale(&lora));
        assert_int_equal(ft_lora_merge_block(bu, w, au, a, &lora, &err), 0);
        for (size_t i = 0; i < bu->numel; i++)
            assert_true(fabsf(w[i] - ref[i]) <= 1e-5f * (1.0f + fabsf(ref[i])));
        free(w);
        free(ref);
        free(a);
    }
    ft_model_layout_free(&base);
    ft_model_layout_free(&ad);
}

static void merges_llama_sites(void **state)
{
    (void)state;
    char *all[] = { "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                    "down_proj", NULL };
    check_family(test_tiny_config(), all, 4, 8.0);
    char *some[] = { "v_proj", "down_proj", NULL }; /* untargeted weights stay as they are */
    check_family(test_tiny_config(), some, 3, 5.0);
}

static void merges_neox_fused_site(void **state)
{
    (void)state;
    ft_model_config c = test_tiny_config();
    c.family = FT_FAMILY_GPT_NEOX;
    c.num_key_value_heads = c.num_attention_heads;
    c.attention_bias = true;
    char *all[] = { "query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h", NULL };
    check_family(c, all, 2, 16.0);
}

static void refuses_another_shape(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = test_tiny_config(), other = c;
    other.intermediate_size = 40;
    char *t[] = { "up_proj", NULL };
    ft_lora_config lora;
    ft_model_layout base, ad;
    assert_int_equal(ft_lora_resolve(&c, 2, 4.0, 0.0, t, &lora, &err), 0);
    assert_int_equal(ft_model_layout_build(&base, &other, &err), 0);
    assert_int_equal(ft_lora_layout_build(&ad, &c, &lora, &err), 0);
    float *w = calloc(base.units[1].numel, sizeof *w), *a = calloc(ad.units[0].numel, sizeof *a);
    assert_int_not_equal(ft_lora_merge_block(&base.units[1], w, &ad.units[0], a, &lora, &err), 0);
    assert_non_null(strstr(err.msg, "mlp.up_proj.lora_B.weight"));
    assert_non_null(strstr(err.msg, "mlp.up_proj.weight"));
    free(w);
    free(a);
    ft_model_layout_free(&base);
    ft_model_layout_free(&ad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merges_llama_sites),
        cmocka_unit_test(merges_neox_fused_site),
        cmocka_unit_test(refuses_another_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
