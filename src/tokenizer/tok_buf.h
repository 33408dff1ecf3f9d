/* Growable byte and id buffers used while encoding and decoding. The owner of the struct owns
 * `data` and releases it with tok_buf_free / tok_ids_free. */
#ifndef FT_TOKENIZER_TOK_BUF_H
#define FT_TOKENIZER_TOK_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct tok_buf {
    char *data;
    size_t len, cap;
} tok_buf;

typedef struct tok_ids {
    int32_t *data;
    size_t len, cap;
} tok_ids;

/* Each returns 0, or -1 when out of memory (the buffer is then unchanged). */
int tok_buf_reserve(tok_buf *b, size_t extra);
int tok_buf_append(tok_buf *b, const void *p, size_t n);
void tok_buf_free(tok_buf *b);

int tok_ids_reserve(tok_ids *v, size_t extra);
int tok_ids_push(tok_ids *v, int32_t id);
void tok_ids_free(tok_ids *v);

#endif
