/* Agreement with HF `tokenizers` on the corpus written by gen_golden.py (10,000 random
 * strings mixing scripts, digits, whitespace runs, punctuation, contractions and special-token
 * look-alikes): ids with special tokens matched and as plain text, decode with and without
 * special tokens, for Llama 3, 3.1 and 2; then random id sequences through decode. See
 * gen_golden.py for the file layout and its key fallbacks. */
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

/* Value of key `base`+`suffix` for tokenizer `base`, following the fallbacks. */
static json_t *golden_get(json_t *row, const char *base, const char *suffix)
{
    char key[16];
    snprintf(key, sizeof key, "%s%s", base, suffix);
    json_t *v = json_object_get(row, key);
    if (v)
        return v;
    if (strcmp(base, "l31") == 0)
        return golden_get(row, "l3", suffix);
    if (strcmp(suffix, "n") == 0)
        return golden_get(row, base, "");
    if (strcmp(suffix, "d") == 0)
        return json_object_get(row, "text");
    if (strcmp(suffix, "s") == 0)
        return golden_get(row, base, "d");
    return NULL;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static bool same_text(const char *a, size_t na, json_t *s)
{
    return json_is_string(s) && na == json_string_length(s) && memcmp(a, json_string_value(s), na) == 0;
}

static void check_tokenizer(const char *dir, const char *key)
{
    ft_tokenizer *t = tt_load(dir);
    ft_tok_scratch *scratch = ft_tok_scratch_new(t);
    assert_non_null(scratch);
    size_t n_rows;
    json_t **rows = tt_jsonl("test/tokenizer/golden.jsonl", &n_rows);
    assert_true(n_rows >= 10000);
    size_t bad = 0, checks = 0;
    for (size_t r = 0; r < n_rows; r++) {
        json_t *text = json_object_get(rows[r], "text");
        const char *s = json_string_value(text);
        size_t len = json_string_length(text);
        for (int plain = 0; plain < 2; plain++) {
            size_t n_exp;
            int32_t *exp = tt_ids(golden_get(rows[r], key, plain ? "n" : ""), &n_exp);
            int32_t *ids;
            size_t n;
            ft_error err = {{0}, 0};
            /* alternate between the scratch-reusing and the one-shot entry points */
            int rc = (r % 2) ? ft_tokenizer_encode(t, s, len, !plain, &ids, &n, &err)
                             : ft_tokenizer_encode_with(t, scratch, s, len, !plain, &ids, &n, &err);
            if (rc != 0)
                fail_msg("%s", err.msg);
            checks++;
            if (!same_ids(ids, n, exp, n_exp) && bad++ < 5)
                fprintf(stderr, "%s line %zu (%s): ids differ for \"%s\"\n", key, r + 1,
                        plain ? "plain" : "specials", s);
            if (!plain) {
                for (int skip = 0; skip < 2; skip++) {
                    char *back;
                    size_t blen;
                    assert_int_equal(ft_tokenizer_decode(t, exp, n_exp, skip, &back, &blen, &err), 0);
                    checks++;
                    if (!same_text(back, blen, golden_get(rows[r], key, skip ? "s" : "d")) &&
                        bad++ < 5)
                        fprintf(stderr, "%s line %zu: decode(skip_special=%d) differs: \"%s\"\n",
                                key, r + 1, skip, back);
                    free(back);
                }
            }
            free(exp);
            free(ids);
        }
        json_decref(rows[r]);
    }
    free(rows);
    ft_tok_scratch_free(scratch);
    ft_tokenizer_free(t);
    fprintf(stderr, "golden %s: %zu strings, %zu checks, %zu failures\n", key, n_rows, checks, bad);
    assert_int_equal(bad, 0);
}

static void test_golden_llama3(void **state)
{
    (void)state;
    check_tokenizer("llama3", "l3");
}

static void test_golden_llama31(void **state)
{
    (void)state;
    check_tokenizer("llama3.1", "l31");
}

static void test_golden_llama2(void **state)
{
    (void)state;
    check_tokenizer("llama2", "l2");
}

static void test_golden_decode(void **state)
{
    (void)state;
    static const char *const keys[] = {"l3", "l31", "l2"};
    static const char *const dirs[] = {"llama3", "llama3.1", "llama2"};
    ft_tokenizer *toks[3];
    for (int i = 0; i < 3; i++)
        toks[i] = tt_load(dirs[i]);
    size_t n_rows, bad = 0;
    json_t **rows = tt_jsonl("test/tokenizer/golden_decode.jsonl", &n_rows);
    assert_true(n_rows > 0);
    for (size_t r = 0; r < n_rows; r++) {
        const char *key = json_string_value(json_object_get(rows[r], "tok"));
        int k = 0;
        while (k < 3 && strcmp(keys[k], key) != 0)
            k++;
        assert_true(k < 3);
        size_t n;
        int32_t *ids = tt_ids(json_object_get(rows[r], "ids"), &n);
        for (int skip = 0; skip < 2; skip++) {
            char *text;
            size_t len;
            ft_error err = {{0}, 0};
            assert_int_equal(ft_tokenizer_decode(toks[k], ids, n, skip, &text, &len, &err), 0);
            if (!same_text(text, len, json_object_get(rows[r], skip ? "s" : "d")) && bad++ < 5)
                fprintf(stderr, "golden_decode line %zu (skip_special=%d): got \"%s\"\n", r + 1,
                        skip, text);
            free(text);
        }
        free(ids);
        json_decref(rows[r]);
    }
    free(rows);
    for (int i = 0; i < 3; i++)
        ft_tokenizer_free(toks[i]);
    fprintf(stderr, "golden_decode: %zu id sequences, %zu failures\n", n_rows, bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_llama3),
        cmocka_unit_test(test_golden_llama31),
        cmocka_unit_test(test_golden_llama2),
        cmocka_unit_test(test_golden_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
