/* Normalizer chain (HF normalizers applied in order to one segment of text). Supported steps
 * are the ones of the Llama 2 legacy layout: Prepend (only to a non-empty string, as HF does)
 * and Replace with a literal pattern (all non-overlapping occurrences, left to right), plus
 * Qwen's NFC (tok_nfc.c). */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_nfc.h"

static int apply_replace(const tok_norm_step *st, const char *s, size_t n, tok_buf *out)
{
    size_t i = 0;
    while (i < n) {
        const char *hit = NULL;
        if (n - i >= st->pattern_len) {
            /* memchr on the first byte, then confirm: patterns are one character long in
             * practice, so this is a plain byte scan. */
            const char *p = s + i;
            const char *end = s + n - st->pattern_len + 1;
            while ((p = memchr(p, st->pattern[0], (size_t)(end - p))) != NULL) {
                if (memcmp(p, st->pattern, st->pattern_len) == 0) {
                    hit = p;
                    break;
                }
                p++;
            }
        }
        size_t upto = hit ? (size_t)(hit - s) : n;
        if (tok_buf_append(out, s + i, upto - i) < 0)
            return -1;
        if (!hit)
            break;
        if (tok_buf_append(out, st->content, st->content_len) < 0)
            return -1;
        i = upto + st->pattern_len;
    }
    return 0;
}

int tok_normalize(const ft_tokenizer *t, const char *s, size_t n, tok_buf *out)
{
    /* Two buffers ping-pong through the chain; the result ends up in out. */
    tok_buf tmp = {0};
    out->len = 0;
    if (tok_buf_append(out, s, n) < 0)
        return -1;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tok_norm_step *st = &t->norm[k];
        tmp.len = 0;
        if (st->kind == TOK_NORM_PREPEND) {
            if (out->len == 0)
                continue;
            if (tok_buf_append(&tmp, st->content, st->content_len) < 0 ||
                tok_buf_append(&tmp, out->data, out->len) < 0)
                goto oom;
        } else if (st->kind == TOK_NORM_NFC) {
            if (tok_nfc(out->data, out->len, &tmp) < 0)
                goto oom;
        } else {
            if (apply_replace(st, out->data, out->len, &tmp) < 0)
                goto oom;
        }
        tok_buf swap = *out;
        *out = tmp;
        tmp = swap;
    }
    tok_buf_free(&tmp);
    return 0;
oom:
    tok_buf_free(&tmp);
    return -1;
}
