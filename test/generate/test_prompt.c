/* Prompt templates and the text codec, on the real Llama tokenizers of test/data:
 *  - llama3-chat "Hello" gives the ids verified against HF (reference-formats §3.2,
 *    the prompt side of the rendered conversation), and stops at <|eot_id|> too;
 *  - llama3.1-chat opens with the dated system block;
 *  - llama2-chat and alpaca are the pieces ftmpi-prep renders, each encoded alone;
 *  - special-token names in the user's text stay text;
 *  - byte tokens: BOS 256 + bytes, decode keeps bytes < 256;
 *  - UTF-8 sanitising for JSON output;
 *  - chatml, qwen2-chat, qwen2.5-chat give the ids of transformers' apply_chat_template
 *    (add_generation_prompt=True, the real chat_template strings of
 *    test/data/chat_templates) on the tiny Qwen2-pipeline tokenizer, and stop at <|im_end|>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "generate/prompt.h"

/* test/data/tokenizers/<which>/tokenizer.json under $dir_env (the working directory when unset) */
static ft_tokenizer *load_from(const char *dir_env, const char *which)
{
    char path[1024];
    const char *dir = getenv(dir_env);
    snprintf(path, sizeof path, "%s/test/data/tokenizers/%s/tokenizer.json", dir ? dir : ".",
             which);
    ft_tokenizer *t;
    ft_error err;
    if (ft_tokenizer_load(path, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
    return t;
}

/* A real tokenizer (llama2, llama3, llama3.1): its JSON is committed compressed and make check
 * unpacks it into the build tree (test/data/Makefile.inc). */
static ft_tokenizer *load(const char *which) { return load_from("FT_BUILDDIR", which); }

/* A tiny tokenizer of test/data/tokenizers/families/, read from the source tree. */
static ft_tokenizer *load_family(const char *family)
{
    char which[256];
    snprintf(which, sizeof which, "families/%s", family);
    return load_from("FT_SRCDIR", which);
}

static void encode(const ft_text_codec *c, ft_template t, const char *sys, const char *prompt,
                   const char *input, int32_t **ids, int *n)
{
    ft_error err;
    if (ft_prompt_encode(c, t, sys, prompt, input, ids, n, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        fail();
    }
}

/* ids of one text piece */
static int piece(const ft_tokenizer *t, const char *s, int32_t *out)
{
    int32_t *ids;
    size_t n;
    ft_error err;
    assert_int_equal(ft_tokenizer_encode(t, s, strlen(s), false, &ids, &n, &err), 0);
    memcpy(out, ids, n * sizeof *ids);
    free(ids);
    return (int)n;
}

static void test_llama3(void **state)
{
    ft_tokenizer *tok = load("llama3");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, -1, -1);
    int32_t *ids;
    int n;
    encode(&c, FT_TEMPLATE_LLAMA3_CHAT, NULL, "  Hello\n", NULL, &ids, &n); /* trimmed */
    const int32_t want[] = { 128000, 128006, 882, 128007, 271, 9906, 128009,
                             128006, 78191, 128007, 271 };
    assert_int_equal(n, sizeof want / sizeof want[0]);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);

    int32_t stops[4];
    int ns = ft_prompt_stop_ids(&c, FT_TEMPLATE_LLAMA3_CHAT, stops, 4);
    int has_eot = 0;
    for (int i = 0; i < ns; i++)
        has_eot |= stops[i] == 128009;
    assert_true(has_eot);

    /* a system turn first; user text naming a special token stays text */
    encode(&c, FT_TEMPLATE_LLAMA3_CHAT, "Be brief.", "<|eot_id|>", NULL, &ids, &n);
    assert_int_equal(ids[0], 128000);
    assert_int_equal(ids[1], 128006);
    assert_int_equal(ids[2], 9125); /* system */
    int eot = 0;
    for (int i = 0; i < n; i++)
        eot += ids[i] == 128009;
    assert_int_equal(eot, 2); /* system and user turns only */
    free(ids);
    ft_tokenizer_free(tok);
}

static void test_llama31(void **state)
{
    ft_tokenizer *tok = load("llama3.1");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, -1, -1);
    int32_t *ids, head[64];
    int n;
    encode(&c, FT_TEMPLATE_LLAMA31_CHAT, NULL, "Hello", NULL, &ids, &n);
    int k = piece(tok, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n", head);
    assert_int_equal(ids[2], 9125);
    assert_int_equal(ids[4], 271);
    assert_memory_equal(ids + 5, head, (size_t)k * sizeof *head);
    assert_int_equal(ids[5 + k], 128009); /* empty system message */
    free(ids);
    ft_tokenizer_free(tok);
}

static void test_llama2(void **state)
{
    ft_tokenizer *tok = load("llama2");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, -1, -1);
    int32_t *ids, want[256];
    int n, k = 0;
    encode(&c, FT_TEMPLATE_LLAMA2_CHAT, "Be brief.", "Hello ", NULL, &ids, &n);
    want[k++] = 1; /* <s> */
    k += piece(tok, "[INST] ", want + k);
    k += piece(tok, "<<SYS>>\nBe brief.\n<</SYS>>\n\nHello", want + k);
    k += piece(tok, " [/INST]", want + k);
    assert_int_equal(n, k);
    assert_memory_equal(ids, want, (size_t)k * sizeof *ids);
    free(ids);
    ft_tokenizer_free(tok);
}

static void test_alpaca(void **state)
{
    ft_tokenizer *tok = load("llama3");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, 128000, 128001);
    int32_t *ids, want[256];
    int n, k = 0;
    encode(&c, FT_TEMPLATE_ALPACA, NULL, "Add.", "2 and 3", &ids, &n);
    want[k++] = 128000;
    k += piece(tok, "Below is an instruction that describes a task, paired with an input that "
                    "provides further context. Write a response that appropriately completes "
                    "the request.\n\n### Instruction:\n", want + k);
    k += piece(tok, "Add.", want + k);
    k += piece(tok, "\n\n### Input:\n", want + k);
    k += piece(tok, "2 and 3", want + k);
    k += piece(tok, "\n\n### Response:\n", want + k);
    assert_int_equal(n, k);
    assert_memory_equal(ids, want, (size_t)k * sizeof *ids);
    free(ids);
    /* without input, and without BOS */
    c.add_bos = false;
    encode(&c, FT_TEMPLATE_ALPACA, NULL, "Add.", NULL, &ids, &n);
    assert_int_not_equal(ids[0], 128000);
    free(ids);
    ft_error err;
    ft_text_codec bytes;
    ft_text_codec_bytes(&bytes);
    assert_int_not_equal(ft_prompt_encode(&bytes, FT_TEMPLATE_LLAMA2_CHAT, NULL, "x", NULL, &ids,
                                          &n, &err), 0);
    assert_non_null(strstr(err.msg, "needs a tokenizer"));
    ft_tokenizer_free(tok);
}

static void test_bytes(void **state)
{
    ft_text_codec c;
    ft_text_codec_bytes(&c);
    int32_t *ids;
    int n;
    encode(&c, FT_TEMPLATE_NONE, NULL, "3+4=", NULL, &ids, &n);
    const int32_t want[] = { 256, '3', '+', '4', '=' };
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    const int32_t gen[] = { '7', 258, '\n', 256 };
    char *text;
    size_t len;
    ft_error err;
    assert_int_equal(ft_completion_decode(&c, gen, 4, &text, &len, &err), 0);
    assert_int_equal(len, 2);
    assert_string_equal(text, "7\n");
    free(text);
    int32_t stops[4];
    assert_int_equal(ft_prompt_stop_ids(&c, FT_TEMPLATE_NONE, stops, 4), 1);
    assert_int_equal(stops[0], 257);
}

static void test_utf8(void **state)
{
    char *s = ft_utf8_sanitize("a\xc3\xa9\xff" "b\xe2\x82", 7);
    assert_string_equal(s, "a\xc3\xa9\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    s = ft_utf8_sanitize("\xed\xa0\x80\xf0\x9f\x98\x80", 7); /* a surrogate, then U+1F600 */
    assert_string_equal(s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xf0\x9f\x98\x80");
    free(s);
}

/* Expected ids: transformers 5.23 apply_chat_template(messages, add_generation_prompt=True)
 * with test/data/chat_templates/{chatml,qwen2,qwen2.5}.jinja on families/qwen2/tokenizer.json,
 * user "Hello, naïve 12 世界" (system NULL or "Be brief."). */
static void test_chatml(void **state)
{
    (void)state;
    ft_tokenizer *tok = load_family("qwen2");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, -1, -1);
    static const int32_t user_gen[] = { 701, 84, 82, 260, 198, 634, 11, 220, 637, 220, 16, 17,
                                        220, 603, 234, 702, 198, 701, 64, 416, 72, 297, 259, 83,
                                        198 };
    static const int32_t brief[] = { 701, 82, 88, 297, 380, 198, 33, 68, 518, 72, 68, 69, 13,
                                     702, 198 };
    static const int32_t qwen2_sys[] = { 701, 82, 88, 297, 380, 198, 56, 400, 220, 64, 81, 68,
                                         220, 64, 220, 264, 75, 79, 69, 84, 75, 220, 64, 416, 72,
                                         297, 259, 83, 13, 702, 198 };
    static const int32_t qwen25_sys[] = { 701, 82, 88, 297, 380, 198, 56, 400, 220, 64, 81, 68,
                                          220, 48, 86, 68, 77, 11, 275, 81, 68, 64, 83, 68, 67,
                                          220, 65, 88, 220, 32, 75, 72, 65, 370, 64, 220, 34, 75,
                                          400, 67, 13, 220, 56, 400, 220, 64, 81, 68, 220, 64,
                                          220, 264, 75, 79, 69, 84, 75, 220, 64, 416, 72, 297,
                                          259, 83, 13, 702, 198 };
    const struct {
        ft_template t;
        const char *sys;
        const int32_t *head;
        size_t n_head;
    } cases[] = {
        { FT_TEMPLATE_CHATML, NULL, NULL, 0 },
        { FT_TEMPLATE_CHATML, "Be brief.", brief, 15 },
        { FT_TEMPLATE_QWEN2_CHAT, NULL, qwen2_sys, sizeof qwen2_sys / sizeof qwen2_sys[0] },
        { FT_TEMPLATE_QWEN2_CHAT, "Be brief.", brief, 15 },
        { FT_TEMPLATE_QWEN25_CHAT, NULL, qwen25_sys, sizeof qwen25_sys / sizeof qwen25_sys[0] },
        { FT_TEMPLATE_QWEN25_CHAT, "Be brief.", brief, 15 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t want[128];
        size_t nw = 0;
        for (size_t i = 0; i < cases[k].n_head; i++)
            want[nw++] = cases[k].head[i];
        for (size_t i = 0; i < sizeof user_gen / sizeof user_gen[0]; i++)
            want[nw++] = user_gen[i];
        int32_t *ids;
        int n;
        encode(&c, cases[k].t, cases[k].sys, "Hello, naïve 12 世界", NULL, &ids, &n);
        assert_int_equal(n, (int)nw);
        assert_memory_equal(ids, want, nw * sizeof *want);
        free(ids);
        int32_t stops[4];
        int ns = ft_prompt_stop_ids(&c, cases[k].t, stops, 4);
        int has_end = 0;
        for (int i = 0; i < ns; i++)
            has_end |= stops[i] == 702; /* <|im_end|> */
        assert_true(has_end);
    }
    ft_tokenizer_free(tok);
}

/* mistral-chat: transformers apply_chat_template(add_generation_prompt=True) with
 * test/data/chat_templates/mistral-v0.3.jinja on families/mistral/tokenizer.json. */
static void test_mistral(void **state)
{
    (void)state;
    ft_tokenizer *tok = load_family("mistral");
    ft_text_codec c;
    ft_text_codec_tokenizer(&c, tok, -1, -1);
    static const int32_t plain[] = { 1, 3, 720, 474, 312, 436, 311, 565, 482, 529, 389, 742, 4 };
    static const int32_t sys[] = { 1, 3, 389, 71, 435, 570, 306, 579, 272, 458, 554, 474, 312,
                                   436, 311, 565, 482, 529, 389, 742, 4 };
    int32_t *ids;
    int n;
    encode(&c, FT_TEMPLATE_MISTRAL_CHAT, NULL, "Hello, naïve 12 世界", NULL, &ids, &n);
    assert_int_equal(n, (int)(sizeof plain / sizeof plain[0]));
    assert_memory_equal(ids, plain, sizeof plain);
    free(ids);
    encode(&c, FT_TEMPLATE_MISTRAL_CHAT, "Be brief.", "Hello, naïve 12 世界", NULL, &ids, &n);
    assert_int_equal(n, (int)(sizeof sys / sizeof sys[0]));
    assert_memory_equal(ids, sys, sizeof sys);
    free(ids);
    int32_t stops[4];
    int ns = ft_prompt_stop_ids(&c, FT_TEMPLATE_MISTRAL_CHAT, stops, 4);
    assert_true(ns >= 1 && stops[0] == 2); /* </s> */
    ft_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3),  cmocka_unit_test(test_llama31),
        cmocka_unit_test(test_llama2),  cmocka_unit_test(test_alpaca),
        cmocka_unit_test(test_bytes),   cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_chatml),  cmocka_unit_test(test_mistral),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
