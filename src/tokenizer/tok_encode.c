/* Encode driver: added tokens -> normalizer -> normalized added tokens -> pre-tokenizer -> BPE
 * (see tok_internal.h for the map of files). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

ft_tok_scratch *ft_tok_scratch_new(const ft_tokenizer *t)
{
    ft_tok_scratch *s = calloc(1, sizeof *s);
    if (s)
        s->t = t;
    return s;
}

void ft_tok_scratch_free(ft_tok_scratch *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < TOK_MAX_STAGES; i++) {
        pcre2_match_data_free(s->match[i]);
        tok_buf_free(&s->prefixed[i]);
    }
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit_stack);
    free(s->raw_spans.data);
    free(s->norm_spans.data);
    tok_buf_free(&s->normalized);
    tok_buf_free(&s->metaspaced);
    tok_bpe_work_free(&s->bpe);
    free(s);
}

typedef struct encode_ctx {
    const ft_tokenizer *t;
    ft_tok_scratch *s;
    tok_ids *out;
} encode_ctx;

static int on_pretoken(void *vctx, const char *piece, size_t n)
{
    encode_ctx *c = vctx;
    return tok_bpe_encode(c->t, &c->s->bpe, piece, n, c->out) < 0 ? 1 : 0;
}

/* HF Metaspace (split false) on one piece of normalized text: every ' ' becomes "▁", and a
 * "▁" goes in front when the scheme says so and the piece does not start with one already.
 * prepend_scheme "first" prepends only to the piece that starts the input (HF: its original
 * offset is 0), so not to text that follows an added token. -1 when out of memory. */
static int metaspace(const ft_tokenizer *t, tok_buf *b, const char *s, size_t n, bool at_start)
{
    static const char rep[] = "\xe2\x96\x81"; /* U+2581 */
    b->len = 0;
    bool starts = n >= 3 && memcmp(s, rep, 3) == 0;
    bool first = n > 0 && s[0] == ' ';
    if (!starts && !first && n > 0 &&
        (t->metaspace == TOK_META_ALWAYS || (t->metaspace == TOK_META_FIRST && at_start)) &&
        tok_buf_append(b, rep, 3) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ' ' ? tok_buf_append(b, rep, 3) < 0 : tok_buf_append(b, &s[i], 1) < 0)
            return -1;
    return 0;
}

/* Normalizes one plain-text segment and encodes it. at_start: the segment begins the input.
 * Returns 0, -1 with err set. */
static int encode_segment(const ft_tokenizer *t, ft_tok_scratch *s, const char *text, size_t n,
                          bool allow_special, bool at_start, tok_ids *out, ft_error *err)
{
    const char *norm = text;
    size_t norm_len = n;
    if (t->n_norm > 0) {
        if (tok_normalize(t, text, n, &s->normalized) < 0)
            return ft_fail(err, "%s: encode: out of memory", t->name);
        norm = s->normalized.data;
        norm_len = s->normalized.len;
    }
    /* Normalized added tokens split the normalized text once more. */
    tok_span whole = {0, norm_len, -1};
    const tok_span *spans = &whole;
    size_t n_spans = 1;
    if (t->norm_trie.n > 0) {
        if (tok_split_added(t, &t->norm_trie, norm, norm_len, allow_special, &s->norm_spans) < 0)
            return ft_fail(err, "%s: encode: out of memory", t->name);
        spans = s->norm_spans.data;
        n_spans = s->norm_spans.len;
    }
    encode_ctx ctx = {t, s, out};
    for (size_t i = 0; i < n_spans; i++) {
        if (spans[i].id >= 0) {
            if (tok_ids_push(out, spans[i].id) < 0)
                return ft_fail(err, "%s: encode: out of memory", t->name);
            continue;
        }
        const char *piece = norm + spans[i].start;
        size_t piece_len = spans[i].end - spans[i].start;
        if (t->metaspace != TOK_META_NONE) {
            if (metaspace(t, &s->metaspaced, piece, piece_len, at_start && spans[i].start == 0) < 0)
                return ft_fail(err, "%s: encode: out of memory", t->name);
            piece = s->metaspaced.data;
            piece_len = s->metaspaced.len;
        }
        int rc = tok_pretokenize(t, s, piece, piece_len, on_pretoken, &ctx, err);
        if (rc > 0)
            return ft_fail(err, "%s: encode: out of memory", t->name);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int ft_tokenizer_encode_with(const ft_tokenizer *t, ft_tok_scratch *s, const char *text, size_t len,
                             bool allow_special, int32_t **ids, size_t *n_ids, ft_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (s->t != t)
        return ft_fail(err, "%s: encode: the scratch was made for another tokenizer; "
                            "create one per tokenizer with ft_tok_scratch_new()", t->name);
    if (!text && len > 0)
        return ft_fail(err, "%s: encode: text is NULL", t->name);
    tok_ids out = {0};
    if (tok_split_added(t, &t->raw_trie, text, len, allow_special, &s->raw_spans) < 0) {
        return ft_fail(err, "%s: encode: out of memory", t->name);
    }
    for (size_t i = 0; i < s->raw_spans.len; i++) {
        const tok_span *sp = &s->raw_spans.data[i];
        if (sp->id >= 0) {
            if (tok_ids_push(&out, sp->id) < 0)
                goto oom;
        } else if (encode_segment(t, s, text + sp->start, sp->end - sp->start, allow_special,
                                  sp->start == 0, &out, err) < 0) {
            tok_ids_free(&out);
            return -1;
        }
    }
    if (out.len == 0)
        tok_ids_free(&out);
    *ids = out.data;
    *n_ids = out.len;
    return 0;
oom:
    tok_ids_free(&out);
    return ft_fail(err, "%s: encode: out of memory", t->name);
}

int ft_tokenizer_encode(const ft_tokenizer *t, const char *text, size_t len, bool allow_special,
                        int32_t **ids, size_t *n_ids, ft_error *err)
{
    ft_tok_scratch *s = ft_tok_scratch_new(t);
    if (!s) {
        *ids = NULL;
        *n_ids = 0;
        return ft_fail(err, "%s: encode: out of memory", t->name);
    }
    int rc = ft_tokenizer_encode_with(t, s, text, len, allow_special, ids, n_ids, err);
    ft_tok_scratch_free(s);
    return rc;
}
