/* Fuzzer: encoding and decoding with real tokenizers (the Llama 3 and Llama 2 tokenizer.json
 * of test/data, the synthetic ones of test/tokenizer), loaded once.
 *
 * Input: one control byte (which tokenizer, special tokens allowed or not, decode mode), then
 * the text. The text is encoded, the ids decoded, and the input reinterpreted as ids
 * (some out of range) decoded too. Checks beyond "no crash": ids in range, and for
 * byte-level tokenizers decode(encode(text)) == text for valid UTF-8 text (no byte lost). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_utf8.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* built: the real tokenizers' JSON is committed compressed and `make fuzzers` unpacks it into
 * the build tree (test/data/Makefile.inc); the synthetic ones are read from the source tree. */
static const struct {
    const char *path;
    bool built;
} files[] = {
    {"test/data/tokenizers/llama3/tokenizer.json", true},
    {"test/data/tokenizers/llama2/tokenizer.json", true},
    {"test/tokenizer/synthetic_bytelevel.json", false},
    {"test/tokenizer/synthetic_sentencepiece.json", false},
};
#define N_TOK (sizeof files / sizeof files[0])
static ft_tokenizer *tok[N_TOK];
static ft_tok_scratch *scratch[N_TOK];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *src = getenv("FT_SRCDIR") ? getenv("FT_SRCDIR") : FUZZ_SRCDIR;
    const char *build = getenv("FT_BUILDDIR") ? getenv("FT_BUILDDIR") : FUZZ_BUILDDIR;
    for (size_t i = 0; i < N_TOK; i++) {
        char path[4096];
        ft_error err;
        snprintf(path, sizeof path, "%s/%s", files[i].built ? build : src, files[i].path);
        if (ft_tokenizer_load(path, &tok[i], &err)) {
            fprintf(stderr, "fuzz_tokenizer_encode: %s\n", err.msg);
            exit(1);
        }
        scratch[i] = ft_tok_scratch_new(tok[i]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned ctl = data[0];
    const size_t which = ctl % N_TOK;
    const bool special = ctl & 0x10, skip = ctl & 0x20, with_scratch = ctl & 0x40;
    const ft_tokenizer *t = tok[which];
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    const int vocab = ft_tokenizer_vocab_size(t);
    ft_error err;

    int32_t *ids = NULL;
    size_t n = 0;
    int rc = with_scratch
                 ? ft_tokenizer_encode_with(t, scratch[which], text, len, special, &ids, &n, &err)
                 : ft_tokenizer_encode(t, text, len, special, &ids, &n, &err);
    if (rc) {
        fprintf(stderr, "encode failed: %s\n", err.msg); /* encode never fails on text */
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            fprintf(stderr, "encode gave id %d outside [0, %d)\n", ids[i], vocab);
            abort();
        }
    char *out = NULL;
    size_t out_len = 0;
    if (ft_tokenizer_decode(t, ids, n, skip, &out, &out_len, &err)) {
        fprintf(stderr, "decode of encoded ids failed: %s\n", err.msg);
        abort();
    }
    const bool byte_level = strcmp(ft_tokenizer_kind(t), "byte_level_bpe") == 0;
    if (byte_level && !special && tok_utf8_valid_prefix(text, len) == len &&
        (out_len != len || memcmp(out, text, len) != 0)) {
        fprintf(stderr, "decode(encode(text)) != text (%zu bytes in, %zu out)\n", len, out_len);
        abort();
    }
    free(out);
    free(ids);

    /* the input as ids, in and out of range */
    size_t m = len / 4;
    int32_t *raw = malloc(m * sizeof *raw + 1);
    for (size_t i = 0; raw && i < m; i++) {
        uint32_t x;
        memcpy(&x, text + 4 * i, 4);
        raw[i] = (x & 0x80000000u) ? (int32_t)x : (int32_t)(x % (uint32_t)(vocab + 2));
    }
    if (raw && ft_tokenizer_decode(t, raw, m, skip, &out, &out_len, &err) == 0)
        free(out);
    free(raw);
    return 0;
}
