/* The reference vectors shipped with the tokenizers (test/data/tokenizers/DIR/vectors*.jsonl,
 * HF encode(text, add_special_tokens=False)): exact ids, and decode(encode(x)) == x. Also the
 * metadata API (BOS/EOS, vocab size, kind, token lookup) and the chat example of
 * doc/reference-formats §3.2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tok_test_util.h"

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, "\n");
}

static void check_vectors(const char *dir, const char *file, bool round_trip)
{
    ft_tokenizer *t = tt_load(dir);
    char rel[256];
    snprintf(rel, sizeof rel, "test/data/tokenizers/%s/%s", dir, file);
    size_t n_rows;
    json_t **rows = tt_jsonl(rel, &n_rows);
    assert_true(n_rows > 0);
    size_t bad = 0;
    for (size_t r = 0; r < n_rows; r++) {
        json_t *text = json_object_get(rows[r], "text");
        size_t n_exp;
        int32_t *exp = tt_ids(json_object_get(rows[r], "ids"), &n_exp);
        int32_t *ids;
        size_t n;
        ft_error err = {{0}, 0};
        assert_int_equal(ft_tokenizer_encode(t, json_string_value(text), json_string_length(text),
                                             true, &ids, &n, &err),
                         0);
        if (n != n_exp || (n && memcmp(ids, exp, n * sizeof *ids) != 0)) {
            if (bad++ < 5) {
                fprintf(stderr, "%s line %zu: ids differ for \"%s\"\n", rel, r + 1,
                        json_string_value(text));
                print_ids("expected", exp, n_exp);
                print_ids("got     ", ids, n);
            }
        } else if (round_trip) {
            char *back;
            size_t len;
            assert_int_equal(ft_tokenizer_decode(t, ids, n, false, &back, &len, &err), 0);
            if (len != json_string_length(text) || memcmp(back, json_string_value(text), len) != 0) {
                if (bad++ < 5)
                    fprintf(stderr, "%s line %zu: decode(encode(x)) != x for \"%s\": \"%s\"\n", rel,
                            r + 1, json_string_value(text), back);
            }
            free(back);
        }
        free(ids);
        free(exp);
        json_decref(rows[r]);
    }
    free(rows);
    ft_tokenizer_free(t);
    fprintf(stderr, "%s: %zu vectors, %zu failures\n", rel, n_rows, bad);
    assert_int_equal(bad, 0);
}

static void test_llama3_vectors(void **state)
{
    (void)state;
    check_vectors("llama3", "vectors.jsonl", true);
}

static void test_llama31_special_vectors(void **state)
{
    (void)state;
    check_vectors("llama3.1", "vectors_special.jsonl", true);
}

static void test_llama2_vectors(void **state)
{
    (void)state;
    check_vectors("llama2", "vectors.jsonl", true);
}

static void expect_ids(const ft_tokenizer *t, const char *text, bool allow_special,
                       const int32_t *exp, size_t n_exp)
{
    int32_t *ids;
    size_t n;
    ft_error err = {{0}, 0};
    assert_int_equal(ft_tokenizer_encode(t, text, strlen(text), allow_special, &ids, &n, &err), 0);
    if (n != n_exp || memcmp(ids, exp, n * sizeof *ids) != 0) {
        print_ids("expected", exp, n_exp);
        print_ids("got     ", ids, n);
        fail_msg("ids differ for \"%s\"", text);
    }
    free(ids);
}

static void test_llama3_metadata(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama3");
    assert_string_equal(ft_tokenizer_kind(t), "byte_level_bpe");
    assert_int_equal(ft_tokenizer_vocab_size(t), 128256);
    assert_int_equal(ft_tokenizer_bos_id(t), 128000);
    /* the sibling tokenizer_config.json (Instruct) names <|eot_id|> */
    assert_int_equal(ft_tokenizer_eos_id(t), 128009);
    assert_int_equal(ft_tokenizer_token_id(t, "<|end_of_text|>"), 128001);
    assert_int_equal(ft_tokenizer_token_id(t, "Ġthe"), 279);
    assert_int_equal(ft_tokenizer_token_id(t, "no such token"), -1);
    assert_string_equal(ft_tokenizer_token(t, 128009), "<|eot_id|>");
    assert_null(ft_tokenizer_token(t, 128256));
    assert_true(ft_tokenizer_is_special(t, 128000));
    assert_false(ft_tokenizer_is_special(t, 279));

    static const char chat[] = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello"
                               "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi!<|eot_id|>";
    static const int32_t chat_ids[] = {128000, 128006, 882,   128007, 271,    9906, 128009,
                                       128006, 78191,  128007, 271,   13347, 0,    128009};
    expect_ids(t, chat, true, chat_ids, sizeof chat_ids / sizeof chat_ids[0]);
    /* as plain text, special-token strings are ordinary characters */
    int32_t *ids;
    size_t n;
    ft_error err = {{0}, 0};
    assert_int_equal(ft_tokenizer_encode(t, chat, strlen(chat), false, &ids, &n, &err), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] < 128000);
    char *text;
    size_t len;
    assert_int_equal(ft_tokenizer_decode(t, ids, n, true, &text, &len, &err), 0);
    assert_string_equal(text, chat);
    free(text);
    free(ids);
    ft_tokenizer_free(t);
}

static void test_llama31_metadata(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama3.1");
    assert_int_equal(ft_tokenizer_token_id(t, "<|finetune_right_pad_id|>"), 128004);
    assert_int_equal(ft_tokenizer_token_id(t, "<|eom_id|>"), 128008);
    assert_int_equal(ft_tokenizer_bos_id(t), 128000);
    assert_int_equal(ft_tokenizer_eos_id(t), 128009);
    ft_tokenizer *t3 = tt_load("llama3");
    assert_true(ft_tokenizer_hash(t) != ft_tokenizer_hash(t3));
    ft_tokenizer_free(t3);
    ft_tokenizer_free(t);
}

static void test_llama2_metadata(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama2");
    assert_string_equal(ft_tokenizer_kind(t), "sentencepiece_bpe");
    assert_int_equal(ft_tokenizer_vocab_size(t), 32000);
    assert_int_equal(ft_tokenizer_bos_id(t), 1);
    assert_int_equal(ft_tokenizer_eos_id(t), 2);
    assert_int_equal(ft_tokenizer_token_id(t, "<0x0A>"), 13);
    assert_int_equal(ft_tokenizer_token_id(t, "▁the"), 278);
    /* doc/reference-formats §3.7 (there with BOS 1 in front) */
    static const int32_t hello[] = {15043, 3186, 29991};
    expect_ids(t, "Hello world!", true, hello, 3);
    static const int32_t llama[] = {1055,  30085, 345,   274, 28059, 29871, 30325,
                                    30346, 30968, 29871, 243, 162,   169,   156};
    expect_ids(t, "naïve café 日本語 🦙", true, llama, sizeof llama / sizeof llama[0]);
    /* legacy: a "▁" is prepended again after a special token */
    static const int32_t after[] = {15043, 1, 3186};
    expect_ids(t, "Hello<s>world", true, after, 3);
    ft_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_vectors),   cmocka_unit_test(test_llama31_special_vectors),
        cmocka_unit_test(test_llama2_vectors),   cmocka_unit_test(test_llama3_metadata),
        cmocka_unit_test(test_llama31_metadata), cmocka_unit_test(test_llama2_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
