/* Fuzzer: tokenizer.json -> ft_tokenizer_load_buffer, then, when it loads, a short encode
 * (both special-token modes) and decode of what came out and of every id, so that a
 * tokenizer the loader accepts is also one the encoder and decoder survive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void encode_decode(const ft_tokenizer *t, const char *text, size_t len, bool special)
{
    int32_t *ids = NULL;
    size_t n = 0;
    ft_error err;
    if (ft_tokenizer_encode(t, text, len, special, &ids, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= ft_tokenizer_vocab_size(t)) {
                fprintf(stderr, "encode gave id %d outside [0, %d)\n", ids[i],
                        ft_tokenizer_vocab_size(t));
                abort();
            }
        char *out = NULL;
        size_t out_len = 0;
        if (ft_tokenizer_decode(t, ids, n, !special, &out, &out_len, &err) == 0)
            free(out);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ft_tokenizer *t = NULL;
    ft_error err;
    if (ft_tokenizer_load_buffer((const char *)data, size, "fuzz.json", &t, &err))
        return 0;
    static const char sample[] = "Hello, world! 123 \xc3\xa9t\xc3\xa9 <s>\t\n  x\xff";
    encode_decode(t, sample, sizeof sample - 1, true);
    encode_decode(t, sample, sizeof sample - 1, false);
    /* every id alone (bounded: a fuzz input may declare a huge vocabulary) */
    int v = ft_tokenizer_vocab_size(t);
    for (int32_t id = 0; id < v && id < 512; id++) {
        char *out = NULL;
        size_t out_len = 0;
        if (ft_tokenizer_decode(t, &id, 1, false, &out, &out_len, &err) == 0)
            free(out);
        (void)ft_tokenizer_token(t, id);
    }
    (void)ft_tokenizer_token_id(t, "<s>");
    ft_tokenizer_free(t);
    return 0;
}
