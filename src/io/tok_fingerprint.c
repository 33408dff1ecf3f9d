#include "io/tok_fingerprint.h"
#include "util/input_file.h"
#include "util/path_join.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* FNV-1a 64 over the canonical stream of doc/formats.md, fed piece by piece. */
typedef struct fp_stream {
    uint64_t h;
} fp_stream;

static void put(fp_stream *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        s->h ^= p[i];
        s->h *= 0x100000001b3ull;
    }
}

static void put_str(fp_stream *s, const char *z) { put(s, z, strlen(z)); }

/* A byte string as "<length>:<bytes>": no escaping, no ambiguity. */
static void put_bytes(fp_stream *s, const char *b, size_t len)
{
    char n[32];
    snprintf(n, sizeof n, "%zu:", len);
    put_str(s, n);
    put(s, b, len);
}

static void put_long(fp_stream *s, long long v)
{
    char n[32];
    snprintf(n, sizeof n, "%lld", v);
    put_str(s, n);
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Canonical JSON: objects with their keys in byte order, strings length-prefixed. */
static int put_json(fp_stream *s, json_t *v)
{
    if (!v || json_is_null(v)) {
        put_str(s, "null");
    } else if (json_is_true(v) || json_is_false(v)) {
        put_str(s, json_is_true(v) ? "true" : "false");
    } else if (json_is_integer(v)) {
        put_long(s, (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        char n[40];
        snprintf(n, sizeof n, "%.17g", json_real_value(v));
        put_str(s, n);
    } else if (json_is_string(v)) {
        put_bytes(s, json_string_value(v), json_string_length(v));
    } else if (json_is_array(v)) {
        put_str(s, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put_str(s, ",");
            if (put_json(s, json_array_get(v, i)))
                return -1;
        }
        put_str(s, "]");
    } else {
        const size_t n = json_object_size(v);
        const char **keys = malloc((n ? n : 1) * sizeof *keys);
        if (!keys)
            return -1;
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) keys[k++] = key;
        qsort(keys, k, sizeof *keys, cmp_keys);
        put_str(s, "{");
        int rc = 0;
        for (size_t i = 0; i < k && !rc; i++) {
            if (i)
                put_str(s, ",");
            put_bytes(s, keys[i], strlen(keys[i]));
            put_str(s, "=");
            rc = put_json(s, json_object_get(v, keys[i]));
        }
        put_str(s, "}");
        free(keys);
        return rc;
    }
    return 0;
}

typedef struct id_entry {
    long long id;
    const char *text;
    size_t len;
    int special; /* added tokens: 0/1 */
} id_entry;

static int cmp_entries(const void *a, const void *b)
{
    const id_entry *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    const size_t n = x->len < y->len ? x->len : y->len;
    const int c = memcmp(x->text, y->text, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* "V <id> <len>:<token>\n" per model.vocab entry, in ascending id order. */
static int put_vocab(fp_stream *s, json_t *vocab, const char *name, ft_error *err)
{
    if (!json_is_object(vocab))
        return ft_fail(err, "%s: model.vocab: missing or not an object", name);
    const size_t n = json_object_size(vocab);
    id_entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return ft_fail(err, "%s: out of memory", name);
    size_t k = 0;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val)
    {
        if (!json_is_integer(val)) {
            free(e);
            return ft_fail(err, "%s: model.vocab[\"%.40s\"]: the id is not an integer", name, key);
        }
        e[k++] = (id_entry){ json_integer_value(val), key, strlen(key), 0 };
    }
    qsort(e, k, sizeof *e, cmp_entries);
    for (size_t i = 0; i < k; i++) {
        put_str(s, "V ");
        put_long(s, e[i].id);
        put_str(s, " ");
        put_bytes(s, e[i].text, e[i].len);
        put_str(s, "\n");
    }
    free(e);
    return 0;
}

/* "M <len>:<left> <len>:<right>\n" per merge, in file order; a merge is written either as
 * "left right" (split at the first space) or as ["left", "right"]. */
static int put_merges(fp_stream *s, json_t *merges, const char *name, ft_error *err)
{
    if (!merges)
        return 0; /* a vocabulary without merges (none in practice) */
    if (!json_is_array(merges))
        return ft_fail(err, "%s: model.merges: not an array", name);
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (sp) {
                an = (size_t)(sp - a);
                b = sp + 1;
                bn = json_string_length(m) - an - 1;
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            an = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            bn = json_string_length(json_array_get(m, 1));
        }
        if (!b)
            return ft_fail(err, "%s: model.merges[%zu]: not a pair", name, i);
        put_str(s, "M ");
        put_bytes(s, a, an);
        put_str(s, " ");
        put_bytes(s, b, bn);
        put_str(s, "\n");
    }
    return 0;
}

/* "A <id> <special 0|1> <len>:<content>\n" per added token, in ascending id order. */
static int put_added(fp_stream *s, json_t *added, const char *name, ft_error *err)
{
    if (!added)
        return 0;
    if (!json_is_array(added))
        return ft_fail(err, "%s: added_tokens: not an array", name);
    const size_t n = json_array_size(added);
    id_entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e)
        return ft_fail(err, "%s: out of memory", name);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(added, i), *id = json_object_get(t, "id"),
               *content = json_object_get(t, "content");
        if (!json_is_integer(id) || !json_is_string(content)) {
            free(e);
            return ft_fail(err, "%s: added_tokens[%zu]: needs an integer id and a string content",
                           name, i);
        }
        e[i] = (id_entry){ json_integer_value(id), json_string_value(content),
                           json_string_length(content),
                           json_is_true(json_object_get(t, "special")) };
    }
    qsort(e, n, sizeof *e, cmp_entries);
    for (size_t i = 0; i < n; i++) {
        put_str(s, "A ");
        put_long(s, e[i].id);
        put_str(s, e[i].special ? " 1 " : " 0 ");
        put_bytes(s, e[i].text, e[i].len);
        put_str(s, "\n");
    }
    free(e);
    return 0;
}

int ft_tok_fingerprint_json(const char *json, size_t len, const char *name,
                            char out[FT_TOK_FINGERPRINT_LEN], ft_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return ft_fail(err, "%s:%d: not valid JSON: %s", name, jerr.line, jerr.text);
    fp_stream s = { 0xcbf29ce484222325ull };
    put_str(&s, "ftmpi tokenizer fingerprint 1\n");
    json_t *model = json_object_get(root, "model");
    int rc = put_vocab(&s, json_object_get(model, "vocab"), name, err) ||
             put_merges(&s, json_object_get(model, "merges"), name, err) ||
             put_added(&s, json_object_get(root, "added_tokens"), name, err);
    if (!rc) {
        put_str(&s, "N ");
        rc = put_json(&s, json_object_get(root, "normalizer"));
        put_str(&s, "\nP ");
        rc = rc || put_json(&s, json_object_get(root, "pre_tokenizer"));
        put_str(&s, "\n");
        if (rc)
            ft_fail(err, "%s: out of memory", name);
    }
    json_decref(root);
    if (rc)
        return -1;
    snprintf(out, FT_TOK_FINGERPRINT_LEN, "%016" PRIx64, s.h);
    return 0;
}

int ft_tok_fingerprint_file(const char *path, char out[FT_TOK_FINGERPRINT_LEN], ft_error *err)
{
    char file[4200];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        ft_path_join(file, sizeof file, path, "tokenizer.json");
    else
        snprintf(file, sizeof file, "%s", path);
    /* a FIFO or /dev/zero there is one line, not a hang (util/input_file.h) */
    char *buf;
    size_t len;
    if (ft_input_read(file, "a tokenizer.json", FT_INPUT_MAX_TOKENIZER, &buf, &len, err))
        return -1;
    int rc = ft_tok_fingerprint_json(buf, len, file, out, err);
    free(buf);
    return rc;
}

int ft_tok_fingerprint_read(const ft_h5file *f, char out[FT_TOK_FINGERPRINT_LEN], ft_error *err)
{
    out[0] = '\0';
    if (!ft_h5_attr_exists(f->id, FT_TOK_FINGERPRINT_ATTR))
        return 0;
    char buf[80];
    if (ft_h5_attr_read_str(f, f->id, FT_TOK_FINGERPRINT_ATTR, buf, sizeof buf, err))
        return -1;
    size_t n = strlen(buf);
    if (n != FT_TOK_FINGERPRINT_LEN - 1 || strspn(buf, "0123456789abcdef") != n)
        return ft_fail(err, "%s: attribute %s is not 16 hex digits", f->path,
                       FT_TOK_FINGERPRINT_ATTR);
    memcpy(out, buf, n + 1);
    return 0;
}

int ft_tok_fingerprint_write(const ft_h5file *f, const char *fp, ft_error *err)
{
    if (!fp || !fp[0])
        return 0;
    return ft_h5_attr_write_str(f, f->id, FT_TOK_FINGERPRINT_ATTR, fp, err);
}

bool ft_tok_fingerprint_conflict(const char *a, const char *b)
{
    return a && b && a[0] && b[0] && strcmp(a, b) != 0;
}
