/* Bad tokenizer.json inputs and bad calls: each must fail with -1 and one line that names the
 * file and says what is wrong, never crash or leak (run under ASan in CI builds). */
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

/* A tiny valid byte-level-free BPE model; the cases below break one thing at a time. */
#define VOCAB "{\"a\":0,\"b\":1,\"ab\":2,\"<unk>\":3}"
#define MODEL(extra) "{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"a b\"]" extra "}"

struct bad_case {
    const char *json;
    const char *expect; /* substring of the error message */
};

static const struct bad_case cases[] = {
    {"[]", "expected a JSON object at the top level"},
    {"{}", "model: missing"},
    {"{\"model\":3}", "model: expected an object"},
    {"{\"model\":{\"vocab\":" VOCAB ",\"merges\":[]}}", "model.type: missing"},
    {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":" VOCAB "}}", "model.type: \"WordPiece\" is not supported"},
    {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "model.type: \"Unigram\" is not supported"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}}", "model.vocab: expected an object"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":{}}}", "model.merges: expected an array"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB "}}", "model.merges: expected an array"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", "model.vocab[\"a\"]: expected an id"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "model.vocab[\"a\"]: expected an id"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1000000000},\"merges\":[]}}", "model.vocab[\"a\"]: expected an id"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "model.vocab: empty vocabulary"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", "is already used by"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"a b\",12]}}", "model.merges[1]: expected string or [a,b] pair"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[[\"a\",\"b\",\"c\"]]}}", "model.merges[0]: expected string or [a,b] pair"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[[\"a\",2]]}}", "model.merges[0]: expected string or [a,b] pair"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"a b c\"]}}", "model.merges[0]: \"a b c\" must be two tokens"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"ab\"]}}", "model.merges[0]: \"ab\" must be two tokens"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"a c\"]}}", "model.merges[0]: token \"c\" is not in model.vocab"},
    {"{\"model\":{\"type\":\"BPE\",\"vocab\":" VOCAB ",\"merges\":[\"b a\"]}}", "model.merges[0]: token \"ba\" is not in model.vocab"},
    {"{\"model\":" MODEL(",\"unk_token\":\"<oops>\"") "}", "model.unk_token: \"<oops>\" is not in model.vocab"},
    {"{\"model\":" MODEL(",\"unk_token\":7") "}", "model.unk_token: expected a string or null"},
    {"{\"model\":" MODEL(",\"dropout\":0.1") "}", "model.dropout"},
    {"{\"model\":" MODEL(",\"continuing_subword_prefix\":\"##\"") "}", "model.continuing_subword_prefix"},
    {"{\"model\":" MODEL("") ",\"added_tokens\":{}}", "added_tokens: expected an array"},
    {"{\"model\":" MODEL("") ",\"added_tokens\":[{\"id\":\"x\",\"content\":\"<s>\"}]}", "added_tokens[0]: expected an object with an id"},
    {"{\"model\":" MODEL("") ",\"added_tokens\":[{\"id\":4,\"content\":5}]}", "added_tokens[0].content: expected a string"},
    {"{\"model\":" MODEL("") ",\"normalizer\":{\"type\":\"NFKC\"}}", "normalizer: normalizer type \"NFKC\" is not supported"},
    {"{\"model\":" MODEL("") ",\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}}", "normalizer.normalizers[0]: normalizer type \"Lowercase\""},
    {"{\"model\":" MODEL("") ",\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"_\"}}", "normalizer.pattern: expected {\"String\""},
    {"{\"model\":" MODEL("") ",\"normalizer\":3}", "normalizer: expected null or an object"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Whitespace\"}}", "pre_tokenizer type \"Whitespace\" is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"split\":true}}", "pre_tokenizer.split: true is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"split\":false}}", "pre_tokenizer.replacement: only"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"split\":false,\"prepend_scheme\":\"sometimes\"}}", "prepend_scheme: \"sometimes\" is not one of"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}}", "pre_tokenizer.pretokenizers[0].behavior: \"Removed\" is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}}", "pre_tokenizer.pretokenizers[0].pattern: PCRE2 cannot compile it"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\",\"invert\":false}}", "a Split or Digits without ByteLevel is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":true}}", "pre_tokenizer: a Split or Digits without ByteLevel is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"split\":false},{\"type\":\"Digits\",\"individual_digits\":true}]}}", "pre_tokenizer.pretokenizers[1]: Digits after Metaspace is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\"}]}}", "pre_tokenizer.pretokenizers[1]: a Split after ByteLevel is not supported"},
    {"{\"model\":" MODEL("") ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"ByteLevel\"}]}}", "pre_tokenizer.pretokenizers[1]: a second ByteLevel is not supported"},
    {"{\"model\":" MODEL("") ",\"decoder\":{\"type\":\"WordPiece\"}}", "decoder: decoder type \"WordPiece\" is not supported"},
    {"{\"model\":" MODEL("") ",\"decoder\":{\"type\":\"Strip\",\"content\":\"ab\",\"start\":1,\"stop\":0}}", "decoder.content: expected exactly one character"},
    {"{\"model\":" MODEL("") ",\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":-1,\"stop\":0}}", "decoder.start: expected a non-negative integer"},
    {"{\"model\":" MODEL("") ",\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"content\":\" \"}]}}", "decoder.decoders[0].pattern"},
    {"{\"model\":" MODEL("") ",", "invalid JSON"},
    {"", "invalid JSON"},
    {"{\"model\":" MODEL("") "} trailing", "invalid JSON"},
};

static void expect_one_line(const char *msg, const char *name, const char *expect)
{
    if (strstr(msg, name) != msg || !strstr(msg, expect) || strchr(msg, '\n'))
        fail_msg("error message \"%s\" should start with \"%s\" and contain \"%s\"", msg, name, expect);
}

static void test_bad_json(void **state)
{
    (void)state;
    size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        ft_tokenizer *t = (ft_tokenizer *)1;
        ft_error err = {{0}, 0};
        int rc = ft_tokenizer_load_buffer(cases[i].json, strlen(cases[i].json), "bad.json", &t, &err);
        if (rc != -1)
            fail_msg("case %zu (%s) loaded", i, cases[i].json);
        assert_null(t);
        expect_one_line(err.msg, "bad.json: ", cases[i].expect);
    }
    fprintf(stderr, "%zu malformed tokenizer.json cases rejected\n", n);
}

static void test_minimal_valid(void **state)
{
    (void)state;
    /* The base of the cases above is itself valid, so each case fails for its own reason. */
    static const char json[] = "{\"model\":" MODEL(",\"unk_token\":\"<unk>\",\"fuse_unk\":true") "}";
    ft_tokenizer *t;
    ft_error err = {{0}, 0};
    assert_int_equal(ft_tokenizer_load_buffer(json, strlen(json), "ok.json", &t, &err), 0);
    int32_t *ids;
    size_t n;
    /* "ab" merges; "xy" is two unknown characters fused into one <unk>; no decoder joins
     * tokens with spaces as HF does. */
    assert_int_equal(ft_tokenizer_encode(t, "abxya", 5, true, &ids, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 0);
    char *text;
    size_t len;
    assert_int_equal(ft_tokenizer_decode(t, ids, n, false, &text, &len, &err), 0);
    assert_string_equal(text, "ab <unk> a");
    free(text);
    free(ids);
    ft_tokenizer_free(t);
}

static void test_truncated_file(void **state)
{
    (void)state;
    size_t len;
    char *buf = tt_read_built("test/data/tokenizers/llama2/tokenizer.json", &len);
    static const size_t cuts[] = {0, 1, 100, 5000, 1000000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        ft_tokenizer *t;
        ft_error err = {{0}, 0};
        assert_int_equal(ft_tokenizer_load_buffer(buf, cuts[i], "cut.json", &t, &err), -1);
        expect_one_line(err.msg, "cut.json: ", "invalid JSON");
    }
    free(buf);
}

static void test_missing_and_unreadable(void **state)
{
    (void)state;
    ft_tokenizer *t;
    ft_error err = {{0}, 0};
    assert_int_equal(ft_tokenizer_load("/nonexistent/tokenizer.json", &t, &err), -1);
    expect_one_line(err.msg, "/nonexistent/tokenizer.json: ", "cannot open");
    char *dir = tt_path("test/data/tokenizers");
    assert_int_equal(ft_tokenizer_load(dir, &t, &err), -1);
    expect_one_line(err.msg, dir, ": ");
    free(dir);
}

static void test_bad_calls(void **state)
{
    (void)state;
    ft_tokenizer *t = tt_load("llama2");
    ft_tokenizer *t3 = tt_load("llama3");
    ft_error err = {{0}, 0};
    char *text;
    size_t len;
    const int32_t ids[] = {15043, 32000};
    assert_int_equal(ft_tokenizer_decode(t, ids, 2, false, &text, &len, &err), -1);
    assert_null(text);
    assert_non_null(strstr(err.msg, "id 32000 at position 1 is not in the vocabulary"));
    const int32_t neg[] = {-1};
    assert_int_equal(ft_tokenizer_decode(t3, neg, 1, false, &text, &len, &err), -1);
    assert_non_null(strstr(err.msg, "id -1 at position 0"));

    ft_tok_scratch *s = ft_tok_scratch_new(t3);
    int32_t *out;
    size_t n;
    assert_int_equal(ft_tokenizer_encode_with(t, s, "x", 1, true, &out, &n, &err), -1);
    assert_null(out);
    assert_non_null(strstr(err.msg, "scratch was made for another tokenizer"));
    ft_tok_scratch_free(s);
    ft_tokenizer_free(t3);
    ft_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_json),       cmocka_unit_test(test_minimal_valid),
        cmocka_unit_test(test_truncated_file), cmocka_unit_test(test_missing_and_unreadable),
        cmocka_unit_test(test_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
