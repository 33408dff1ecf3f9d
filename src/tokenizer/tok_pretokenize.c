/* Pre-tokenizer: the stages of tok_stage, each on every piece of the one before. Regex stages
 * are HF Split(Regex, behavior "Isolated") run with PCRE2 in UTF mode (JIT when available):
 * "Isolated" means both the matches and the gaps between them are pieces.
 *
 * HF compiles the pattern with Oniguruma, whose \s is the Unicode White_Space property
 * (U+0085 NEL included, U+FEFF BOM not). PCRE2's \s in UCP mode is "Z or h/v space" and
 * misses NEL, so \s and \S are rewritten into explicit White_Space classes before compiling.
 * The pattern itself comes from tokenizer.json; nothing here is specific to Llama 3.
 *
 * Text that is not well-formed UTF-8 cannot be given to a UTF-mode regex. Byte-level models
 * therefore run the regex on each maximal well-formed run and make every stray byte a
 * pre-token of its own (it then encodes to that byte's token). */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_utf8.h"

#define WHITE_SPACE_ITEMS \
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
    "\\x{202F}\\x{205F}\\x{3000}"

/* Copies the pattern into out, replacing \s and \S. Returns 0, or -1 with why filled. */
static int rewrite_pattern(const char *p, size_t n, tok_buf *out, char *why, size_t why_len)
{
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        int rc = 0;
        if (c == '\\' && i + 1 < n) {
            char e = p[++i];
            if (e == 's') {
                rc = tok_buf_append(out, in_class ? WHITE_SPACE_ITEMS : "[" WHITE_SPACE_ITEMS "]",
                                    strlen(WHITE_SPACE_ITEMS) + (in_class ? 0 : 2));
            } else if (e == 'S') {
                if (in_class) {
                    snprintf(why, why_len, "\\S inside a character class is not supported");
                    return -1;
                }
                rc = tok_buf_append(out, "[^" WHITE_SPACE_ITEMS "]", strlen(WHITE_SPACE_ITEMS) + 3);
            } else if (e == 'Q') {
                snprintf(why, why_len, "\\Q...\\E quoting is not supported");
                return -1;
            } else {
                char esc[2] = {'\\', e};
                rc = tok_buf_append(out, esc, 2);
            }
        } else if (!in_class && c == '[') {
            in_class = true;
            rc = tok_buf_append(out, "[", 1);
            /* "[^]" and "[]": a ']' right after the opening is a literal member. */
            if (rc == 0 && i + 1 < n && p[i + 1] == '^')
                rc = tok_buf_append(out, &p[++i], 1);
            if (rc == 0 && i + 1 < n && p[i + 1] == ']')
                rc = tok_buf_append(out, &p[++i], 1);
        } else if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') {
            /* POSIX class [:name:] inside a class: copy through ":]". */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') {
                    end = p + j + 2;
                    break;
                }
            if (!end) {
                snprintf(why, why_len, "unterminated POSIX class at offset %zu", i);
                return -1;
            }
            rc = tok_buf_append(out, p + i, (size_t)(end - (p + i)));
            i = (size_t)(end - p) - 1;
        } else if (in_class && c == '[') {
            snprintf(why, why_len, "nested character class at offset %zu is not supported", i);
            return -1;
        } else {
            if (in_class && c == ']')
                in_class = false;
            rc = tok_buf_append(out, &c, 1);
        }
        if (rc < 0) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
    return 0;
}

int tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, char *why, size_t why_len)
{
    tok_buf pat = {0};
    if (rewrite_pattern(pattern, len, &pat, why, why_len) < 0) {
        tok_buf_free(&pat);
        return -1;
    }
    int code;
    PCRE2_SIZE at;
    /* UCP: \p{..}, \d, \w and caseless matching follow Unicode, as in Oniguruma. */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(pat.data ? pat.data : ""), pat.len,
                                   PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
    tok_buf_free(&pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(why, why_len, "PCRE2 cannot compile it (%s, near offset %zu of the rewritten pattern)",
                 (const char *)msg, (size_t)at);
        return -1;
    }
    /* JIT is an optimisation only: without it (unsupported CPU, SELinux) the interpreter
     * gives the same matches. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return 0;
}

static int ensure_match_state(const ft_tokenizer *t, ft_tok_scratch *s, ft_error *err)
{
    if (s->mctx) /* made last: once set, the state is complete */
        return 0;
    for (size_t k = 0; k < t->n_stages; k++)
        if (t->stages[k].re && !s->match[k] &&
            !(s->match[k] = pcre2_match_data_create_from_pattern(t->stages[k].re, NULL)))
            return ft_fail(err, "%s: pre_tokenizer: out of memory for the regex match state",
                           t->name);
    /* The default JIT stack is 32 KiB on the machine stack; long whitespace runs under
     * "\s+(?!\S)" backtrack deeply, so give the JIT a heap stack that can grow to 8 MiB. */
    if (!s->jit_stack)
        s->jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    if (!s->mctx)
        return ft_fail(err, "%s: pre_tokenizer: out of memory for the regex match state", t->name);
    if (s->jit_stack)
        pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
    return 0;
}

typedef struct stage_out {
    tok_piece_fn fn;
    void *ctx;
    ft_error *err;
} stage_out;

static int run_stages(const ft_tokenizer *t, ft_tok_scratch *s, size_t k, const char *text,
                      size_t n, const stage_out *o);

/* Stage k = REGEX over well-formed UTF-8: matches and the gaps between them go to stage k+1. */
static int split_regex(const ft_tokenizer *t, ft_tok_scratch *s, size_t k, const char *text,
                       size_t n, const stage_out *o)
{
    pcre2_code *re = t->stages[k].re;
    pcre2_match_data *md = s->match[k];
    size_t pos = 0, gap = 0; /* gap: start of text not yet emitted */
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, n, pos, PCRE2_NO_UTF_CHECK, md, s->mctx);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ft_fail(o->err, "%s: pre_tokenizer regex failed on a %zu-byte text: %s",
                           t->name, n, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {
            /* An empty match yields an empty (dropped) piece; step over one character as
             * Oniguruma's iterator does, leaving it in the gap. */
            uint32_t cp;
            int len = tok_utf8_next((const unsigned char *)text + ms, n - ms, &cp);
            pos = ms + (size_t)(len > 0 ? len : 1);
            continue;
        }
        if (ms > gap && (rc = run_stages(t, s, k + 1, text + gap, ms - gap, o)) != 0)
            return rc;
        if ((rc = run_stages(t, s, k + 1, text + ms, me - ms, o)) != 0)
            return rc;
        pos = gap = me;
    }
    if (gap < n)
        return run_stages(t, s, k + 1, text + gap, n - gap, o);
    return 0;
}

/* The bytes whose byte-level characters are numeric (see tok_stage). */
static bool numeric_byte(unsigned char b)
{
    return (b >= '0' && b <= '9') || b == 0xB2 || b == 0xB3 || b == 0xB9 || (b >= 0xBC && b <= 0xBE);
}

/* Stage k = BYTE_DIGITS: runs of non-numeric bytes, and numeric bytes one by one or in runs. */
static int split_byte_digits(const ft_tokenizer *t, ft_tok_scratch *s, size_t k, const char *text,
                             size_t n, const stage_out *o)
{
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        bool num = numeric_byte(u[i]);
        size_t j = i + 1;
        if (!num || !t->stages[k].individual)
            while (j < n && numeric_byte(u[j]) == num)
                j++;
        int rc = run_stages(t, s, k + 1, text + i, j - i, o);
        if (rc != 0)
            return rc;
        i = j;
    }
    return 0;
}

static int run_stages(const ft_tokenizer *t, ft_tok_scratch *s, size_t k, const char *text,
                      size_t n, const stage_out *o)
{
    if (k == t->n_stages)
        return o->fn(o->ctx, text, n);
    switch (t->stages[k].kind) {
    case TOK_STAGE_REGEX: return split_regex(t, s, k, text, n, o);
    case TOK_STAGE_BYTE_DIGITS: return split_byte_digits(t, s, k, text, n, o);
    case TOK_STAGE_PREFIX_SPACE:
        break;
    }
    if (n > 0 && text[0] == ' ')
        return run_stages(t, s, k + 1, text, n, o);
    tok_buf *b = &s->prefixed[k];
    b->len = 0;
    if (tok_buf_append(b, " ", 1) < 0 || tok_buf_append(b, text, n) < 0)
        return ft_fail(o->err, "%s: encode: out of memory", t->name);
    return run_stages(t, s, k + 1, b->data, b->len, o);
}

int tok_pretokenize(const ft_tokenizer *t, ft_tok_scratch *s, const char *text, size_t n,
                    tok_piece_fn fn, void *ctx, ft_error *err)
{
    if (n == 0)
        return 0;
    if (!t->byte_level) /* SentencePiece: the segment is one word; BPE handles stray bytes */
        return fn(ctx, text, n);
    if (t->n_stages > 0 && ensure_match_state(t, s, err) < 0)
        return -1;
    stage_out o = {fn, ctx, err};
    size_t i = 0;
    while (i < n) {
        size_t good = tok_utf8_valid_prefix(text + i, n - i);
        if (good > 0) {
            int rc = run_stages(t, s, 0, text + i, good, &o);
            if (rc != 0)
                return rc;
            i += good;
        }
        if (i < n) { /* one stray byte */
            int rc = fn(ctx, text + i, 1);
            if (rc != 0)
                return rc;
            i++;
        }
    }
    return 0;
}
