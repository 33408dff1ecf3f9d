#include "tokenizer/tok_jsonl.h"
#include "util/input_file.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_buf.h"

static int append_ids_line(tok_buf *b, const int32_t *ids, size_t n)
{
    char num[16];
    if (tok_buf_append(b, "{\"ids\":[", 8) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(num, sizeof num, i ? ",%" PRId32 : "%" PRId32, ids[i]);
        if (tok_buf_append(b, num, (size_t)k) < 0)
            return -1;
    }
    return tok_buf_append(b, "]}\n", 3);
}

/* JSON string escaping; the text is valid UTF-8 (decode guarantees it), written raw. */
static int append_text_line(tok_buf *b, const char *s, size_t n)
{
    if (tok_buf_append(b, "{\"text\":\"", 9) < 0)
        return -1;
    size_t run = 0; /* start of bytes not yet copied */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        char esc[8];
        size_t k;
        switch (c) {
        case '"': k = 2, memcpy(esc, "\\\"", 2); break;
        case '\\': k = 2, memcpy(esc, "\\\\", 2); break;
        case '\n': k = 2, memcpy(esc, "\\n", 2); break;
        case '\r': k = 2, memcpy(esc, "\\r", 2); break;
        case '\t': k = 2, memcpy(esc, "\\t", 2); break;
        default: k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c); break;
        }
        if (tok_buf_append(b, s + run, i - run) < 0 || tok_buf_append(b, esc, k) < 0)
            return -1;
        run = i + 1;
    }
    if (tok_buf_append(b, s + run, n - run) < 0)
        return -1;
    return tok_buf_append(b, "\"}\n", 3);
}

/* Reads one line and parses it as a JSON object. Returns 1 at end of input, 0 with *obj set,
 * -1 with err set. */
static int next_object(FILE *in, const char *in_name, size_t lineno, char **line, size_t *cap,
                       json_t **obj, ft_error *err)
{
    errno = 0;
    /* bounded: /dev/zero on stdin is one endless line */
    long n = ft_input_getline(line, cap, in, FT_INPUT_MAX_LINE);
    if (n < -1)
        return ft_fail(err, "%s:%zu: %s", in_name, lineno, n == -2 ? "a line longer than 256 MB: "
                       "not JSONL?" : "out of memory reading a line");
    if (n < 0) {
        if (ferror(in))
            return ft_fail(err, "%s: read error: %s", in_name, strerror(errno));
        return 1;
    }
    json_error_t je;
    *obj = json_loadb(*line, (size_t)n, JSON_ALLOW_NUL, &je);
    if (!*obj)
        return ft_fail(err, "%s:%zu: invalid JSON (column %d): %s", in_name, lineno, je.column, je.text);
    if (!json_is_object(*obj)) {
        json_decref(*obj);
        return ft_fail(err, "%s:%zu: expected a JSON object", in_name, lineno);
    }
    return 0;
}

static int flush(tok_buf *b, FILE *out, ft_error *err)
{
    if (b->len && fwrite(b->data, 1, b->len, out) != b->len)
        return ft_fail(err, "write error: %s", strerror(errno));
    b->len = 0;
    return 0;
}

/* Converts one input object (the line's) to one output line appended to ob. Returns 0, or -1
 * with err set; obj stays the caller's. */
typedef int (*line_converter)(void *ctx, json_t *obj, const char *in_name, size_t lineno,
                              tok_buf *ob, ft_error *err);

/* The loop both directions share: one object per input line, one output line per object,
 * the output buffered and written in blocks of about 64 KiB (and once more at the end). */
static int convert_lines(FILE *in, const char *in_name, FILE *out, line_converter convert,
                         void *ctx, ft_error *err)
{
    char *line = NULL;
    size_t cap = 0;
    tok_buf ob = {0};
    int rc = 0;
    for (size_t lineno = 1; rc == 0; lineno++) {
        json_t *obj = NULL; /* set when next_object returns 0 */
        int r = next_object(in, in_name, lineno, &line, &cap, &obj, err);
        if (r != 0) {
            rc = r < 0 ? -1 : 0;
            break;
        }
        rc = convert(ctx, obj, in_name, lineno, &ob, err);
        json_decref(obj);
        if (rc == 0 && ob.len > (1u << 16))
            rc = flush(&ob, out, err);
    }
    if (rc == 0)
        rc = flush(&ob, out, err);
    tok_buf_free(&ob);
    free(line);
    return rc;
}

typedef struct encode_ctx {
    const ft_tokenizer *t;
    ft_tok_scratch *s;
    bool allow_special;
} encode_ctx;

static int encode_line(void *ctx, json_t *obj, const char *in_name, size_t lineno, tok_buf *ob,
                       ft_error *err)
{
    const encode_ctx *e = ctx;
    json_t *text = json_object_get(obj, "text");
    if (!json_is_string(text))
        return ft_fail(err, "%s:%zu: expected a string member \"text\"", in_name, lineno);
    int32_t *ids;
    size_t n;
    int rc = ft_tokenizer_encode_with(e->t, e->s, json_string_value(text),
                                      json_string_length(text), e->allow_special, &ids, &n, err);
    if (rc < 0) {
        ft_fail_context(err, "%s:%zu", in_name, lineno);
        return rc;
    }
    if (append_ids_line(ob, ids, n) < 0)
        rc = ft_fail(err, "out of memory");
    free(ids);
    return rc;
}

int ft_tok_jsonl_encode(const ft_tokenizer *t, FILE *in, const char *in_name, FILE *out,
                        bool allow_special, ft_error *err)
{
    encode_ctx e = {t, ft_tok_scratch_new(t), allow_special};
    int rc = e.s ? convert_lines(in, in_name, out, encode_line, &e, err)
                 : ft_fail(err, "out of memory");
    ft_tok_scratch_free(e.s);
    return rc;
}

typedef struct decode_ctx {
    const ft_tokenizer *t;
    bool skip_special;
    int32_t *ids; /* owned: the ids of a line, reused from line to line */
    size_t ids_cap;
} decode_ctx;

static int decode_line(void *ctx, json_t *obj, const char *in_name, size_t lineno, tok_buf *ob,
                       ft_error *err)
{
    decode_ctx *d = ctx;
    int rc = 0;
    json_t *arr = json_object_get(obj, "ids");
    size_t n = json_array_size(arr);
    if (!json_is_array(arr)) {
        rc = ft_fail(err, "%s:%zu: expected an array member \"ids\"", in_name, lineno);
    } else if (n > d->ids_cap) {
        int32_t *p = realloc(d->ids, n * sizeof *p);
        if (!p)
            rc = ft_fail(err, "out of memory");
        else
            d->ids = p, d->ids_cap = n;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
            json_integer_value(v) > INT32_MAX)
            rc = ft_fail(err, "%s:%zu: ids[%zu]: expected an integer id", in_name, lineno, i);
        else
            d->ids[i] = (int32_t)json_integer_value(v);
    }
    if (rc < 0)
        return rc;
    char *text;
    size_t len;
    if (ft_tokenizer_decode(d->t, d->ids, n, d->skip_special, &text, &len, err) < 0)
        return ft_fail_context(err, "%s:%zu", in_name, lineno);
    if (append_text_line(ob, text, len) < 0)
        rc = ft_fail(err, "out of memory");
    free(text);
    return rc;
}

int ft_tok_jsonl_decode(const ft_tokenizer *t, FILE *in, const char *in_name, FILE *out,
                        bool skip_special, ft_error *err)
{
    decode_ctx d = {t, skip_special, NULL, 0};
    int rc = convert_lines(in, in_name, out, decode_line, &d, err);
    free(d.ids);
    return rc;
}
