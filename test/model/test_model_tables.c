/* The model's tables: the family table (family.h) and the field table
 * (model_fields.h). Each family is found again by its name and its architecture and
 * named in ft_family_names(); each field row reads and writes its own member of
 * ft_model_config and no other, under a name no other row has, and carries the
 * config.json key of every family whose Hugging Face config has the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/model_fields.h"

static void test_families_by_name_and_listed(void **state)
{
    (void)state;
    char listed[256] = "";
    for (int i = 0; i < FT_FAMILY_COUNT; i++) {
        const ft_family_info *f = ft_family_info_of((ft_model_family)i);
        assert_non_null(f);
        assert_int_equal(f->family, i);
        assert_ptr_equal(ft_family_by_name(f->name), f);
        assert_ptr_equal(ft_family_by_architecture(f->architecture), f);
        size_t len = strlen(listed);
        snprintf(listed + len, sizeof listed - len, "%s%s", i ? ", " : "", f->name);
    }
    assert_string_equal(ft_family_names(), listed);
    assert_null(ft_family_info_of(FT_FAMILY_COUNT));
    assert_null(ft_family_by_name("llama2"));
    /* the stored enum values never move (run configs hold them) */
    assert_int_equal(FT_FAMILY_LLAMA, 0);
    assert_int_equal(FT_FAMILY_GPTJ, 5);
    assert_string_equal(ft_family_info_of(FT_FAMILY_QWEN2)->name, "qwen2");
    assert_true(ft_family_info_of(FT_FAMILY_QWEN2)->qkv_bias);
}

static void test_fields_touch_only_their_member(void **state)
{
    (void)state;
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    assert_true(n >= 19);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            assert_true(strcmp(fields[i].attr, fields[j].attr) != 0);
            assert_true(fields[i].offset != fields[j].offset);
        }
        ft_model_config zero, c;
        memset(&zero, 0, sizeof zero);
        memset(&c, 0, sizeof c);
        double v = fields[i].type == FT_FIELD_BOOL ? 1.0
                   : fields[i].type == FT_FIELD_FAMILY ? FT_FAMILY_GPTJ
                   : fields[i].type == FT_FIELD_DOUBLE ? 0.25 : 12345.0;
        ft_model_field_set(&c, &fields[i], v);
        assert_true(ft_model_field_get(&c, &fields[i]) == v);
        for (size_t j = 0; j < n; j++)
            if (j != i)
                assert_true(ft_model_field_get(&c, &fields[j]) == 0.0);
        assert_true(memcmp(&c, &zero, sizeof c) != 0);
    }
}

static void test_known_rows(void **state)
{
    (void)state;
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    ft_model_config c;
    memset(&c, 0, sizeof c);
    c.parallel_residual = true;
    c.rope_theta = 5e5;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(fields[i].attr, "parallel_residual") == 0)
            assert_true(ft_model_field_get(&c, &fields[i]) == 1.0 && fields[i].shape &&
                        fields[i].omit_when_absent && !fields[i].required);
        if (strcmp(fields[i].attr, "rope_theta") == 0)
            assert_true(ft_model_field_get(&c, &fields[i]) == 5e5 && fields[i].required);
        if (strcmp(fields[i].attr, "bos_token_id") == 0)
            assert_true(fields[i].absent == -1.0);
    }
}

/* Each family's config.json keys for ftmpi's fields, as Hugging Face's config classes
 * (LlamaConfig, Qwen2Config, Qwen3Config, MistralConfig, GPTNeoXConfig, GPTJConfig)
 * name them: { family, field's /config attribute, config.json key }. Written here
 * apart from the table so that a row that lacks a family's key, or has one that
 * family's config.json does not, fails. */
typedef struct hf_key_case {
    ft_model_family family;
    const char *attr, *key;
} hf_key_case;

#define LLAMA_KEYED(fam)                                                                   \
    { fam, "vocab_size", "vocab_size" }, { fam, "hidden_size", "hidden_size" },            \
    { fam, "intermediate_size", "intermediate_size" },                                     \
    { fam, "num_hidden_layers", "num_hidden_layers" },                                     \
    { fam, "num_attention_heads", "num_attention_heads" },                                 \
    { fam, "num_key_value_heads", "num_key_value_heads" }, { fam, "head_dim", "head_dim" }, \
    { fam, "max_position_embeddings", "max_position_embeddings" },                         \
    { fam, "tie_word_embeddings", "tie_word_embeddings" },                                 \
    { fam, "bos_token_id", "bos_token_id" }, { fam, "eos_token_id", "eos_token_id" },      \
    { fam, "model_family", "model_type" }, { fam, "rms_norm_eps", "rms_norm_eps" },        \
    { fam, "rope_theta", "rope_theta" }

static const hf_key_case hf_keys[] = {
    LLAMA_KEYED(FT_FAMILY_LLAMA), { FT_FAMILY_LLAMA, "attention_bias", "attention_bias" },
    LLAMA_KEYED(FT_FAMILY_QWEN2), { FT_FAMILY_QWEN2, "sliding_window", "sliding_window" },
    LLAMA_KEYED(FT_FAMILY_QWEN3), { FT_FAMILY_QWEN3, "sliding_window", "sliding_window" },
    { FT_FAMILY_QWEN3, "attention_bias", "attention_bias" },
    LLAMA_KEYED(FT_FAMILY_MISTRAL), { FT_FAMILY_MISTRAL, "sliding_window", "sliding_window" },
    { FT_FAMILY_GPT_NEOX, "vocab_size", "vocab_size" },
    { FT_FAMILY_GPT_NEOX, "hidden_size", "hidden_size" },
    { FT_FAMILY_GPT_NEOX, "intermediate_size", "intermediate_size" },
    { FT_FAMILY_GPT_NEOX, "num_hidden_layers", "num_hidden_layers" },
    { FT_FAMILY_GPT_NEOX, "num_attention_heads", "num_attention_heads" },
    { FT_FAMILY_GPT_NEOX, "max_position_embeddings", "max_position_embeddings" },
    { FT_FAMILY_GPT_NEOX, "tie_word_embeddings", "tie_word_embeddings" },
    { FT_FAMILY_GPT_NEOX, "bos_token_id", "bos_token_id" },
    { FT_FAMILY_GPT_NEOX, "eos_token_id", "eos_token_id" },
    { FT_FAMILY_GPT_NEOX, "model_family", "model_type" },
    { FT_FAMILY_GPT_NEOX, "rotary_dim", "rotary_pct" },
    { FT_FAMILY_GPT_NEOX, "parallel_residual", "use_parallel_residual" },
    { FT_FAMILY_GPT_NEOX, "attention_bias", "attention_bias" },
    { FT_FAMILY_GPT_NEOX, "gelu_tanh", "hidden_act" },
    { FT_FAMILY_GPT_NEOX, "rms_norm_eps", "layer_norm_eps" },
    { FT_FAMILY_GPT_NEOX, "rope_theta", "rotary_emb_base" },
    { FT_FAMILY_GPTJ, "vocab_size", "vocab_size" }, { FT_FAMILY_GPTJ, "hidden_size", "n_embd" },
    { FT_FAMILY_GPTJ, "intermediate_size", "n_inner" },
    { FT_FAMILY_GPTJ, "num_hidden_layers", "n_layer" },
    { FT_FAMILY_GPTJ, "num_attention_heads", "n_head" },
    { FT_FAMILY_GPTJ, "max_position_embeddings", "n_positions" },
    { FT_FAMILY_GPTJ, "tie_word_embeddings", "tie_word_embeddings" },
    { FT_FAMILY_GPTJ, "bos_token_id", "bos_token_id" },
    { FT_FAMILY_GPTJ, "eos_token_id", "eos_token_id" },
    { FT_FAMILY_GPTJ, "model_family", "model_type" },
    { FT_FAMILY_GPTJ, "rotary_dim", "rotary_dim" },
    { FT_FAMILY_GPTJ, "gelu_tanh", "activation_function" },
    { FT_FAMILY_GPTJ, "rms_norm_eps", "layer_norm_epsilon" },
};

/* The key the list above expects for a row and family; NULL: none. */
static const char *expected_hf_key(ft_model_family family, const char *attr)
{
    for (size_t i = 0; i < sizeof hf_keys / sizeof hf_keys[0]; i++)
        if (hf_keys[i].family == family && strcmp(hf_keys[i].attr, attr) == 0)
            return hf_keys[i].key;
    return NULL;
}

static void test_fields_hf_keys(void **state)
{
    (void)state;
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    size_t matched = 0;
    for (int fam = 0; fam < FT_FAMILY_COUNT; fam++) {
        for (size_t i = 0; i < n; i++) {
            const char *want = expected_hf_key((ft_model_family)fam, fields[i].attr);
            const char *have = fields[i].hf_key[fam];
            if (!want != !have || (want && strcmp(want, have) != 0))
                fail_msg("field %s, family %s: config.json key \"%s\" in the table, "
                         "\"%s\" expected", fields[i].attr,
                         ft_family_info_of((ft_model_family)fam)->name, have ? have : "(none)",
                         want ? want : "(none)");
            matched += want != NULL;
            /* two fields under one key would be read into both */
            for (size_t j = 0; j < i; j++)
                assert_false(have && fields[j].hf_key[fam] &&
                             strcmp(have, fields[j].hf_key[fam]) == 0);
        }
    }
    /* every expected key belongs to some row (a misspelt attribute would skip it) */
    assert_int_equal(matched, sizeof hf_keys / sizeof hf_keys[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families_by_name_and_listed),
        cmocka_unit_test(test_fields_touch_only_their_member),
        cmocka_unit_test(test_known_rows),
        cmocka_unit_test(test_fields_hf_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
