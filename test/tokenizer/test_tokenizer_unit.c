/* Behaviour the corpus tests cannot reach: added-token flags on small synthetic tokenizers
 * (against HF answers in golden_synthetic.jsonl), invalid UTF-8 input, NUL bytes, very long
 * words (the merge loop must stay O(n log n)), concurrent encoding, and the byte-level and
 * UTF-8 helpers. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tok_test_util.h"
#include "tokenizer/tok_bytelevel.h"
#include "tokenizer/tok_nfc.h"
#include "tokenizer/tok_utf8.h"

static int32_t *encode(const ft_tokenizer *t, const char *s, size_t len, bool allow_special,
                       size_t *n)
{
    int32_t *ids;
    ft_error err = {{0}, 0};
    if (ft_tokenizer_encode(t, s, len, allow_special, &ids, n, &err) < 0)
        fail_msg("%s", err.msg);
    return ids;
}

static char *decode(const ft_tokenizer *t, const int32_t *ids, size_t n, bool skip, size_t *len)
{
    char *text;
    ft_error err = {{0}, 0};
    if (ft_tokenizer_decode(t, ids, n, skip, &text, len, &err) < 0)
        fail_msg("%s", err.msg);
    return text;
}

static bool ids_equal(const int32_t *a, size_t na, json_t *arr)
{
    if (json_array_size(arr) != na)
        return false;
    for (size_t i = 0; i < na; i++)
        if (json_integer_value(json_array_get(arr, i)) != a[i])
            return false;
    return true;
}

static void test_synthetic(void **state)
{
    (void)state;
    size_t n_rows, bad = 0;
    json_t **rows = tt_jsonl("test/tokenizer/golden_synthetic.jsonl", &n_rows);
    assert_true(n_rows > 0);
    ft_tokenizer *t = NULL;
    char loaded[128] = "";
    for (size_t r = 0; r < n_rows; r++) {
        const char *name = json_string_value(json_object_get(rows[r], "tok"));
        if (strcmp(name, loaded) != 0) {
            ft_tokenizer_free(t);
            char rel[256];
            snprintf(rel, sizeof rel, "test/tokenizer/%s", name);
            char *path = tt_path(rel);
            ft_error err = {{0}, 0};
            if (ft_tokenizer_load(path, &t, &err) < 0)
                fail_msg("%s", err.msg);
            free(path);
            snprintf(loaded, sizeof loaded, "%s", name);
        }
        json_t *text = json_object_get(rows[r], "text");
        for (int plain = 0; plain < 2; plain++) {
            size_t n;
            int32_t *ids = encode(t, json_string_value(text), json_string_length(text), !plain, &n);
            if (!ids_equal(ids, n, json_object_get(rows[r], plain ? "idsn" : "ids")) && bad++ < 8)
                fprintf(stderr, "%s: \"%s\" (%s): ids differ\n", name, json_string_value(text),
                        plain ? "plain" : "specials");
            free(ids);
        }
        size_t n;
        int32_t *ids = tt_ids(json_object_get(rows[r], "ids"), &n);
        for (int skip = 0; skip < 2; skip++) {
            size_t len;
            char *back = decode(t, ids, n, skip, &len);
            json_t *exp = json_object_get(rows[r], skip ? "s" : "d");
            if ((len != json_string_length(exp) || memcmp(back, json_string_value(exp), len) != 0) &&
                bad++ < 8)
                fprintf(stderr, "%s: decode of \"%s\" (skip=%d) = \"%s\"\n", name,
                        json_string_value(text), skip, back);
            free(back);
        }
        free(ids);
        json_decref(rows[r]);
    }
    ft_tokenizer_free(t);
    free(rows);
    fprintf(stderr, "synthetic: %zu cases, %zu failures\n", n_rows, bad);
    assert_int_equal(bad, 0);
}

/* Byte-level: every stray byte is a pre-token of its own and becomes that byte's token. */
static void test_invalid_utf8_bytelevel(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama3");
    static const char text[] = "a\xff" "b\xe6\x97 c\xed\xa0\x80";
    size_t n;
    int32_t *ids = encode(t, text, sizeof text - 1, true, &n);
    char tok[8];
    int32_t expect[16];
    size_t ne = 0;
    /* "a", 0xFF, "b", 0xE6, 0x97, " c", 0xED, 0xA0, 0x80 */
    expect[ne++] = ft_tokenizer_token_id(t, "a");
    static const uint8_t stray1[] = {0xFF};
    for (size_t i = 0; i < 1; i++) {
        tok[tok_utf8_encode(tok_bytelevel_char(stray1[i]), tok)] = '\0';
        expect[ne++] = ft_tokenizer_token_id(t, tok);
    }
    expect[ne++] = ft_tokenizer_token_id(t, "b");
    static const uint8_t stray2[] = {0xE6, 0x97};
    for (size_t i = 0; i < 2; i++) {
        tok[tok_utf8_encode(tok_bytelevel_char(stray2[i]), tok)] = '\0';
        expect[ne++] = ft_tokenizer_token_id(t, tok);
    }
    expect[ne++] = ft_tokenizer_token_id(t, "Ġc");
    static const uint8_t stray3[] = {0xED, 0xA0, 0x80};
    for (size_t i = 0; i < 3; i++) {
        tok[tok_utf8_encode(tok_bytelevel_char(stray3[i]), tok)] = '\0';
        expect[ne++] = ft_tokenizer_token_id(t, tok);
    }
    assert_int_equal(n, ne);
    for (size_t i = 0; i < n; i++) {
        assert_true(expect[i] >= 0);
        assert_int_equal(ids[i], expect[i]);
    }
    /* decode is HF's lossy UTF-8: one U+FFFD per maximal invalid subpart */
    size_t len;
    char *back = decode(t, ids, n, false, &len);
    assert_string_equal(back, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    free(back);
    free(ids);
    ft_tokenizer_free(t);
}

/* SentencePiece: a stray byte is a character outside the vocabulary -> its <0xXX> token. */
static void test_invalid_utf8_sentencepiece(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama2");
    static const char text[] = "Hello\xff\xfe world";
    size_t n;
    int32_t *ids = encode(t, text, sizeof text - 1, true, &n);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 15043);    /* ▁Hello */
    assert_int_equal(ids[1], 0xff + 3); /* <0xFF> */
    assert_int_equal(ids[2], 0xfe + 3); /* <0xFE> */
    assert_int_equal(ids[3], 3186);     /* ▁world */
    size_t len;
    char *back = decode(t, ids, n, false, &len);
    /* ByteFallback: an invalid run gives one U+FFFD per byte */
    assert_string_equal(back, "Hello\xEF\xBF\xBD\xEF\xBF\xBD world");
    free(back);
    free(ids);
    ft_tokenizer_free(t);
}

static void test_nul_bytes(void **state)
{
    (void)state;
    static const char *const dirs[] = {"llama3", "llama2"};
    static const char text[] = "a\0b\0\0 c";
    for (int d = 0; d < 2; d++) {
        ft_tokenizer *t = tt_load(dirs[d]);
        size_t n, len;
        int32_t *ids = encode(t, text, sizeof text - 1, true, &n);
        assert_true(n >= 4);
        char *back = decode(t, ids, n, false, &len);
        assert_int_equal(len, sizeof text - 1);
        assert_memory_equal(back, text, len);
        free(back);
        free(ids);
        ft_tokenizer_free(t);
    }
}

/* One 400 KB word: a quadratic merge loop would take minutes; ours takes well under a
 * second. Checks the round trip and a generous time bound. */
static void test_long_word(void **state)
{
    (void)state;
    static const char *const dirs[] = {"llama3", "llama2"};
    size_t len = 400000;
    char *text = malloc(len);
    assert_non_null(text);
    uint32_t x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        text[i] = "abcdefghijklmnopqrstuvwxyz"[(x >> 16) % 26];
    }
    for (int d = 0; d < 2; d++) {
        ft_tokenizer *t = tt_load(dirs[d]);
        clock_t c0 = clock();
        size_t n, blen;
        int32_t *ids = encode(t, text, len, true, &n);
        double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
        fprintf(stderr, "%s: 400 KB word -> %zu ids in %.3f s\n", dirs[d], n, secs);
        assert_true(secs < 20.0);
        char *back = decode(t, ids, n, false, &blen);
        assert_int_equal(blen, len);
        assert_memory_equal(back, text, len);
        free(back);
        free(ids);
        ft_tokenizer_free(t);
    }
    free(text);
}

/* Very long whitespace runs stress the "\s+(?!\S)" backtracking in the regex. */
static void test_long_whitespace(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama3");
    size_t len = 200000;
    char *text = malloc(len);
    assert_non_null(text);
    for (size_t i = 0; i < len; i++)
        text[i] = (i % 1000 == 999) ? 'x' : (i % 7 == 0 ? '\t' : ' ');
    size_t n, blen;
    int32_t *ids = encode(t, text, len, true, &n);
    char *back = decode(t, ids, n, false, &blen);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    free(text);
    ft_tokenizer_free(t);
}

struct thread_job {
    const ft_tokenizer *t;
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n;
};

static void *encode_many(void *arg)
{
    struct thread_job *job = arg;
    ft_tok_scratch *s = ft_tok_scratch_new(job->t);
    ft_error err = {{0}, 0};
    for (int rep = 0; rep < 20; rep++) {
        free(job->ids);
        if (ft_tokenizer_encode_with(job->t, s, job->text, job->len, true, &job->ids, &job->n, &err) < 0)
            job->n = (size_t)-1;
    }
    ft_tok_scratch_free(s);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama3.1");
    static const char text[] = "<|begin_of_text|>Concurrent encoding: naïve café 日本語 🦙 "
                               "I'm 12345 years old.\n\n  spaces\ttab<|eot_id|>";
    size_t n_ref;
    int32_t *ref = encode(t, text, sizeof text - 1, true, &n_ref);
    pthread_t th[4];
    struct thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct thread_job){t, text, sizeof text - 1, NULL, 0};
        assert_int_equal(pthread_create(&th[i], NULL, encode_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].n, n_ref);
        assert_memory_equal(jobs[i].ids, ref, n_ref * sizeof *ref);
        free(jobs[i].ids);
    }
    free(ref);
    ft_tokenizer_free(t);
}

static void test_bytelevel_alphabet(void **state)
{
    (void)state;
    bool seen[512] = {false};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tok_bytelevel_char((uint8_t)b);
        assert_true(cp < 512);
        assert_false(seen[cp]);
        seen[cp] = true;
        assert_int_equal(tok_bytelevel_byte(cp), b);
    }
    assert_int_equal(tok_bytelevel_char(' '), 0x120);  /* Ġ */
    assert_int_equal(tok_bytelevel_char('\n'), 0x10A); /* Ċ */
    assert_int_equal(tok_bytelevel_char('\t'), 0x109); /* ĉ */
    assert_int_equal(tok_bytelevel_char('A'), 'A');
    assert_int_equal(tok_bytelevel_char(0xAD), 0x143);
    assert_int_equal(tok_bytelevel_byte(0x144), -1);
    assert_int_equal(tok_bytelevel_byte(0x20), -1);
}

static void check_lossy(const char *in, size_t n, const char *expect)
{
    tok_buf out = {0};
    assert_int_equal(tok_utf8_append_lossy(&out, in, n), 0);
    assert_int_equal(out.len, strlen(expect));
    assert_memory_equal(out.data, expect, out.len);
    tok_buf_free(&out);
}

/* Added tokens are appended to the string pool while the vocabulary index still reads it:
 * a long new added token moves the pool, and the next added token that is already in the
 * vocabulary must still be found there (fuzz_tokenizer_json found the index reading the
 * freed pool; test/fuzz/corpus/tokenizer_json/regress-added-pool-moved). */
static void test_added_tokens_move_pool(void **state)
{
    (void)state;
    char long_token[600];
    memset(long_token, 'x', sizeof long_token - 1);
    long_token[sizeof long_token - 1] = '\0';
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"<s>\":1},\"merges\":[]},"
             "\"added_tokens\":[{\"id\":2,\"content\":\"%s\",\"special\":true},"
             "{\"id\":1,\"content\":\"<s>\",\"special\":true}]}",
             long_token);
    ft_tokenizer *t = NULL;
    ft_error err;
    assert_int_equal(ft_tokenizer_load_buffer(json, strlen(json), "pool.json", &t, &err), 0);
    assert_int_equal(ft_tokenizer_token_id(t, "<s>"), 1);
    assert_int_equal(ft_tokenizer_token_id(t, long_token), 2);
    ft_tokenizer_free(t);
}

/* A word whose symbols have no id and no unk_token encodes to nothing (as in HF), also the
 * second time, from the word cache; fuzz_tokenizer_json found both paths computing NULL + 0
 * (UBSan) when nothing had been produced yet (corpus: regress-bpe-empty-word-null). */
static void test_word_without_ids(void **state)
{
    (void)state;
    static const char json[] =
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    ft_tokenizer *t = NULL;
    ft_error err;
    assert_int_equal(ft_tokenizer_load_buffer(json, strlen(json), "noids.json", &t, &err), 0);
    ft_tok_scratch *s = ft_tok_scratch_new(t);
    assert_non_null(s);
    for (int pass = 0; pass < 2; pass++) {
        int32_t *ids = NULL;
        size_t n = 99;
        assert_int_equal(ft_tokenizer_encode_with(t, s, "b", 1, false, &ids, &n, &err), 0);
        assert_int_equal(n, 0);
        free(ids);
    }
    ft_tok_scratch_free(s);
    ft_tokenizer_free(t);
}

static void test_utf8_lossy(void **state)
{
    (void)state;
#define FFFD "\xEF\xBF\xBD"
    /* same answers as Python bytes.decode("utf-8", "replace") and Rust from_utf8_lossy */
    check_lossy("abc", 3, "abc");
    check_lossy("\xe6\x97" "a", 3, FFFD "a");
    check_lossy("\xf0\x9f\xa6", 3, FFFD);
    check_lossy("\xc0\xaf", 2, FFFD FFFD);
    check_lossy("\xed\xa0\x80", 3, FFFD FFFD FFFD);
    check_lossy("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD);
    check_lossy("\xe0\x80\x80", 3, FFFD FFFD FFFD);
    check_lossy("\xf0\x9f\xa6\x99\xf0", 5, "\xf0\x9f\xa6\x99" FFFD);
    check_lossy("\x80\xbf", 2, FFFD FFFD);
#undef FFFD
    assert_true(tok_is_white_space(0x85));
    assert_false(tok_is_white_space(0xFEFF));
    assert_false(tok_is_white_space(0x200B));
}

/* NFC against Python's unicodedata: golden_nfc.txt (gen_nfc_table.py --golden) holds input
 * and expected code points in hex; each line is encoded to UTF-8, normalized, compared. */
static size_t hex_to_utf8(char *line, char *out)
{
    size_t n = 0;
    char *end;
    for (unsigned long cp = strtoul(line, &end, 16); end != line; cp = strtoul(line, &end, 16)) {
        n += (size_t)tok_utf8_encode((uint32_t)cp, out + n);
        line = end;
    }
    return n;
}

static void test_nfc_golden(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/test/tokenizer/golden_nfc.txt", FT_TEST_SRCDIR);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024], in[512], want[512];
    int n_lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = 0;
        size_t ni = hex_to_utf8(line, in), nw = hex_to_utf8(tab + 1, want);
        tok_buf out = {0};
        assert_int_equal(tok_nfc(in, ni, &out), 0);
        if (out.len != nw || memcmp(out.data, want, nw) != 0)
            fail_msg("NFC differs from unicodedata for %s", line);
        tok_buf_free(&out);
        n_lines++;
    }
    fclose(f);
    assert_true(n_lines > 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_invalid_utf8_bytelevel),
        cmocka_unit_test(test_invalid_utf8_sentencepiece),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_long_whitespace),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bytelevel_alphabet),
        cmocka_unit_test(test_utf8_lossy),
        cmocka_unit_test(test_added_tokens_move_pool),
        cmocka_unit_test(test_word_without_ids),
        cmocka_unit_test(test_nfc_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
