#include "tokenizer/tok_buf.h"

#include <stdlib.h>
#include <string.h>

/* Growth by doubling keeps appends amortised O(1). */
static int grow(void **data, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *p = realloc(*data, cap2 * elem);
    if (!p)
        return -1;
    *data = p;
    *cap = cap2;
    return 0;
}

int tok_buf_reserve(tok_buf *b, size_t extra)
{
    return grow((void **)&b->data, &b->cap, b->len + extra, 1);
}

int tok_buf_append(tok_buf *b, const void *p, size_t n)
{
    if (tok_buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void tok_buf_free(tok_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tok_ids_reserve(tok_ids *v, size_t extra)
{
    return grow((void **)&v->data, &v->cap, v->len + extra, sizeof *v->data);
}

int tok_ids_push(tok_ids *v, int32_t id)
{
    if (v->len == v->cap && tok_ids_reserve(v, 1) < 0)
        return -1;
    v->data[v->len++] = id;
    return 0;
}

void tok_ids_free(tok_ids *v)
{
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}
