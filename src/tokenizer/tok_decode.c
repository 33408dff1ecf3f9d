/* Decoder: ids -> token strings -> the tokenizer.json decoder chain -> UTF-8 text, like HF
 * TokenizerImpl::decode. Each step maps a list of strings to a new list (two lists
 * ping-pong); at the end the list is concatenated. Supported steps: ByteLevel, Replace
 * (literal), ByteFallback, Fuse, Strip. Without a decoder HF joins tokens with " ". */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_bytelevel.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_utf8.h"

typedef struct strlist {
    tok_buf bytes;
    size_t *off, *len;
    size_t n, cap;
} strlist;

/* Starts a new string at the end of the list; append its bytes with tok_buf_append on
 * l->bytes, then close it with end_str. */
static int begin_str(strlist *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (!o)
            return -1;
        l->off = o;
        size_t *n = realloc(l->len, cap * sizeof *n);
        if (!n)
            return -1;
        l->len = n;
        l->cap = cap;
    }
    l->off[l->n] = l->bytes.len;
    l->len[l->n] = 0;
    return 0;
}

static void end_str(strlist *l)
{
    l->len[l->n] = l->bytes.len - l->off[l->n];
    l->n++;
}

static int push_str(strlist *l, const char *s, size_t n)
{
    if (begin_str(l) < 0 || tok_buf_append(&l->bytes, s, n) < 0)
        return -1;
    end_str(l);
    return 0;
}

/* String i. A list of empty strings has no byte buffer at all, and NULL + 0 is undefined
 * in C (UBSan), hence the "" (found by fuzz_tokenizer_json). */
static const char *str_at(const strlist *l, size_t i)
{
    return l->bytes.data ? l->bytes.data + l->off[i] : "";
}

static void strlist_free(strlist *l)
{
    tok_buf_free(&l->bytes);
    free(l->off);
    free(l->len);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "<0xXX>" -> the byte, else -1. Mirrors Rust u8::from_str_radix on the two characters,
 * which also takes "+X". */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    if (s[3] == '+')
        return hex_digit(s[4]);
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static int step_byte_level(const strlist *in, strlist *out)
{
    /* Tokens spelled in the byte alphabet become their bytes; any other token (an added token
     * such as "<|eot_id|>" made of printable ASCII is spelled in the alphabet too) is taken
     * verbatim. The bytes of all tokens are then read as UTF-8, lossily. */
    tok_buf raw = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = str_at(in, i);
        rc = tok_bytelevel_unmap(s, in->len[i], &raw);
        if (rc == 1)
            rc = tok_buf_append(&raw, s, in->len[i]);
    }
    if (rc == 0)
        rc = begin_str(out);
    if (rc == 0)
        rc = tok_utf8_append_lossy(&out->bytes, raw.data, raw.len);
    if (rc == 0)
        end_str(out);
    tok_buf_free(&raw);
    return rc;
}

static int step_replace(const tok_dec_step *st, const strlist *in, strlist *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *s = str_at(in, i);
        size_t n = in->len[i];
        if (begin_str(out) < 0)
            return -1;
        for (size_t j = 0; j < n;) {
            if (n - j >= st->pattern_len && memcmp(s + j, st->pattern, st->pattern_len) == 0) {
                if (tok_buf_append(&out->bytes, st->content, st->content_len) < 0)
                    return -1;
                j += st->pattern_len;
            } else {
                if (tok_buf_append(&out->bytes, s + j, 1) < 0)
                    return -1;
                j++;
            }
        }
        end_str(out);
    }
    return 0;
}

/* Runs of <0xXX> tokens become one string if their bytes are valid UTF-8, else one U+FFFD per
 * byte (HF ByteFallback; note: per byte, not per maximal subpart). */
static int flush_bytes(tok_buf *run, strlist *out)
{
    if (run->len == 0)
        return 0;
    int rc;
    if (tok_utf8_valid_prefix(run->data, run->len) == run->len) {
        rc = push_str(out, run->data, run->len);
    } else {
        rc = begin_str(out);
        for (size_t i = 0; i < run->len && rc == 0; i++)
            rc = tok_buf_append(&out->bytes, "\xEF\xBF\xBD", 3);
        if (rc == 0)
            end_str(out);
    }
    run->len = 0;
    return rc;
}

static int step_byte_fallback(const strlist *in, strlist *out)
{
    tok_buf run = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = str_at(in, i);
        int b = byte_token(s, in->len[i]);
        if (b >= 0) {
            char c = (char)b;
            rc = tok_buf_append(&run, &c, 1);
        } else {
            rc = flush_bytes(&run, out);
            if (rc == 0)
                rc = push_str(out, s, in->len[i]);
        }
    }
    if (rc == 0)
        rc = flush_bytes(&run, out);
    tok_buf_free(&run);
    return rc;
}

static int step_fuse(const strlist *in, strlist *out)
{
    if (begin_str(out) < 0 || tok_buf_append(&out->bytes, in->bytes.data, in->bytes.len) < 0)
        return -1;
    end_str(out);
    return 0;
}

/* Strip: per string, drop up to `start` leading and `stop` trailing copies of one
 * character. */
static int step_strip(const tok_dec_step *st, const strlist *in, strlist *out)
{
    size_t cl = st->pattern_len;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = str_at(in, i);
        size_t a = 0, b = in->len[i];
        for (size_t k = 0; k < st->start && b - a >= cl && memcmp(s + a, st->pattern, cl) == 0; k++)
            a += cl;
        for (size_t k = 0; k < st->stop && b - a >= cl && memcmp(s + b - cl, st->pattern, cl) == 0; k++)
            b -= cl;
        if (push_str(out, s + a, b - a) < 0)
            return -1;
    }
    return 0;
}

int ft_tokenizer_decode(const ft_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                        char **text, size_t *len, ft_error *err)
{
    *text = NULL;
    *len = 0;
    strlist a = {0}, b = {0};
    tok_buf res = {0};
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !(t->id_flags[id] & TOK_ID_PRESENT)) {
            strlist_free(&a);
            return ft_fail(err, "%s: decode: id %ld at position %zu is not in the vocabulary "
                                "(valid ids: 0..%ld)",
                           t->name, (long)id, i, (long)t->n_ids - 1);
        }
        if (skip_special && (t->id_flags[id] & TOK_ID_SPECIAL))
            continue;
        size_t tlen;
        const char *tok = tok_spelling(t, id, &tlen);
        if (push_str(&a, tok, tlen) < 0)
            goto oom;
    }
    for (size_t k = 0; k < t->n_dec; k++) {
        const tok_dec_step *st = &t->dec[k];
        b.n = 0;
        b.bytes.len = 0;
        int rc;
        switch (st->kind) {
        case TOK_DEC_BYTE_LEVEL: rc = step_byte_level(&a, &b); break;
        case TOK_DEC_REPLACE: rc = step_replace(st, &a, &b); break;
        case TOK_DEC_BYTE_FALLBACK: rc = step_byte_fallback(&a, &b); break;
        case TOK_DEC_FUSE: rc = step_fuse(&a, &b); break;
        default: rc = step_strip(st, &a, &b); break;
        }
        if (rc < 0)
            goto oom;
        strlist swap = a;
        a = b;
        b = swap;
    }
    /* Concatenate (HF joins the decoder's output with ""; without a decoder, with " "). */
    for (size_t i = 0; i < a.n; i++) {
        if (!t->has_decoder && i > 0 && tok_buf_append(&res, " ", 1) < 0)
            goto oom;
        if (tok_buf_append(&res, str_at(&a, i), a.len[i]) < 0)
            goto oom;
    }
    if (tok_buf_append(&res, "", 1) < 0)
        goto oom;
    strlist_free(&a);
    strlist_free(&b);
    *text = res.data;
    *len = res.len - 1;
    return 0;
oom:
    tok_buf_free(&res);
    strlist_free(&a);
    strlist_free(&b);
    return ft_fail(err, "%s: decode: out of memory", t->name);
}
