/* safetensors reader and writer (io/safetensors.h). */
#include "io/safetensors.h"
#include "util/input_file.h"
#include "util/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    size_t size;
} dtypes[FT_ST_N_DTYPES] = {
    [FT_ST_BOOL] = { "BOOL", 1 },       [FT_ST_U8] = { "U8", 1 },
    [FT_ST_I8] = { "I8", 1 },           [FT_ST_F8_E5M2] = { "F8_E5M2", 1 },
    [FT_ST_F8_E4M3] = { "F8_E4M3", 1 }, [FT_ST_I16] = { "I16", 2 },
    [FT_ST_U16] = { "U16", 2 },         [FT_ST_F16] = { "F16", 2 },
    [FT_ST_BF16] = { "BF16", 2 },       [FT_ST_I32] = { "I32", 4 },
    [FT_ST_U32] = { "U32", 4 },         [FT_ST_F32] = { "F32", 4 },
    [FT_ST_F64] = { "F64", 8 },         [FT_ST_I64] = { "I64", 8 },
    [FT_ST_U64] = { "U64", 8 },
};

const char *ft_st_dtype_name(ft_st_dtype d)
{
    return (unsigned)d < FT_ST_N_DTYPES ? dtypes[d].name : "?";
}

int ft_st_dtype_parse(const char *s)
{
    for (int i = 0; s && i < FT_ST_N_DTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0)
            return i;
    return -1;
}

size_t ft_st_dtype_size(ft_st_dtype d) { return (unsigned)d < FT_ST_N_DTYPES ? dtypes[d].size : 0; }

bool ft_st_dtype_is_weight(ft_st_dtype d)
{
    return d == FT_ST_BF16 || d == FT_ST_F16 || d == FT_ST_F32;
}

uint64_t ft_st_tensor_numel(const ft_st_tensor *t)
{
    return ft_st_tensor_bytes(t) / ft_st_dtype_size(t->dtype);
}

/* -------------------------------------------------------------- raw I/O */

static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* values[i] of the first keys[i] equal to key, or NULL: the file's metadata and an index's
 * weight_map are both kept as two parallel arrays in file order, and searched in order
 * (a duplicate key answers with its first value). */
static const char *map_lookup(char *const *keys, char *const *values, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0)
            return values[i];
    return NULL;
}

/* ------------------------------------------------------------------ reader */

void ft_st_close(ft_st_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    for (int i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Reads a non-negative JSON integer. */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_metadata(ft_st_file *f, const char *path, const json_t *meta, ft_error *err)
{
    if (!json_is_object(meta))
        return ft_fail(err, "%s: safetensors header: __metadata__ is not an object "
                       "(it must map strings to strings)", path);
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values)
        return ft_fail(err, "out of host memory reading %s", path);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)meta, k, v) {
        if (!json_is_string(v))
            return ft_fail(err, "%s: safetensors header: __metadata__ value of '%s' is not a "
                           "string (the format allows only string->string metadata)", path, k);
        f->meta_keys[f->n_meta] = dup_str(k);
        f->meta_values[f->n_meta] = dup_str(json_string_value(v));
        f->n_meta++;
        if (!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1])
            return ft_fail(err, "out of host memory reading %s", path);
    }
    return 0;
}

static int parse_tensor(ft_st_tensor *t, const char *path, const char *name, const json_t *v,
                        unsigned flags, ft_error *err)
{
    if (!json_is_object(v))
        return ft_fail(err, "%s: safetensors header: entry '%s' is not an object", path, name);
    const json_t *jd = json_object_get(v, "dtype");
    const json_t *js = json_object_get(v, "shape");
    const json_t *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return ft_fail(err, "%s: safetensors header: tensor '%s' needs \"dtype\" (string), "
                       "\"shape\" (array) and \"data_offsets\" (array)", path, name);
    int d = ft_st_dtype_parse(json_string_value(jd));
    if (d < 0)
        return ft_fail(err, "%s: tensor '%s' has unknown dtype '%s'", path, name,
                       json_string_value(jd));
    if (!(flags & FT_ST_ANY_DTYPE) && !ft_st_dtype_is_weight((ft_st_dtype)d))
        return ft_fail(err, "%s: tensor '%s' has dtype %s; ftmpi reads only BF16, F16 and F32 "
                       "weights", path, name, dtypes[d].name);
    t->dtype = (ft_st_dtype)d;
    size_t nd = json_array_size(js);
    if (nd > FT_ST_MAX_DIMS)
        return ft_fail(err, "%s: tensor '%s' has %zu dimensions (at most %d supported)", path,
                       name, nd, FT_ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t bytes = dtypes[d].size;
    for (size_t i = 0; i < nd; i++) {
        if (get_u64(json_array_get(js, i), &t->shape[i]))
            return ft_fail(err, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path,
                           name, i);
        if (__builtin_mul_overflow(bytes, t->shape[i], &bytes))
            return ft_fail(err, "%s: tensor '%s': shape overflows 64 bits", path, name);
    }
    if (json_array_size(jo) != 2 || get_u64(json_array_get(jo, 0), &t->begin) ||
        get_u64(json_array_get(jo, 1), &t->end) || t->end < t->begin)
        return ft_fail(err, "%s: tensor '%s': data_offsets must be [begin, end] with "
                       "0 <= begin <= end", path, name);
    if (t->end - t->begin != bytes)
        return ft_fail(err, "%s: tensor '%s': data_offsets span %llu bytes but shape x %s "
                       "needs %llu (corrupt header)", path, name,
                       (unsigned long long)(t->end - t->begin), dtypes[d].name,
                       (unsigned long long)bytes);
    t->name = dup_str(name);
    return t->name ? 0 : ft_fail(err, "out of host memory reading %s", path);
}

static const ft_st_tensor *sort_base;

static int cmp_offset(const void *a, const void *b)
{
    const ft_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_name_idx(const void *a, const void *b)
{
    return strcmp(sort_base[*(const int *)a].name, sort_base[*(const int *)b].name);
}

/* Checks that the byte ranges tile [0, data_len) exactly: sorted by offset, each
 * begins where the previous ended (no gap, no overlap). */
static int check_offsets(ft_st_file *f, const char *path, uint64_t data_len, ft_error *err)
{
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_offset);
    uint64_t pos = 0;
    for (int i = 0; i < f->n_tensors; i++) {
        const ft_st_tensor *t = &f->tensors[i];
        if (t->begin != pos)
            return ft_fail(err, "%s: tensor '%s' starts at data offset %llu, expected %llu "
                           "(%s between tensors; corrupt header)", path, t->name,
                           (unsigned long long)t->begin, (unsigned long long)pos,
                           t->begin > pos ? "gap" : "overlap");
        pos = t->end;
    }
    if (pos != data_len)
        return ft_fail(err, "%s: the tensors cover %llu data bytes but the file holds %llu "
                       "after the header (%s)", path, (unsigned long long)pos,
                       (unsigned long long)data_len,
                       pos > data_len ? "truncated file" : "trailing bytes after the last tensor");
    return 0;
}

int ft_st_parse_header(ft_st_file *f, const char *path, const char *json, uint64_t header_len,
                       uint64_t file_size, unsigned flags, ft_error *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->header_len = header_len;
    f->data_start = 8 + header_len;
    f->file_size = file_size;
    if (file_size < f->data_start)
        return ft_fail(err, "%s: header length %llu is larger than the file", path,
                       (unsigned long long)header_len);
    if (header_len == 0 || json[0] != '{')
        return ft_fail(err, "%s: safetensors header does not start with '{' (not a safetensors "
                       "file?)", path);
    json_error_t je;
    json_t *root = json_loadb(json, (size_t)header_len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ft_fail(err, "%s: safetensors header is not valid JSON at byte %d: %s", path,
                       je.position, je.text);
    int rc = -1;
    if (!json_is_object(root)) {
        ft_fail(err, "%s: safetensors header is not a JSON object", path);
        goto done;
    }
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        ft_fail(err, "out of host memory reading %s", path);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (strcmp(k, "__metadata__") == 0) {
            if (parse_metadata(f, path, v, err))
                goto done;
            continue;
        }
        if (parse_tensor(&f->tensors[f->n_tensors], path, k, v, flags, err))
            goto done;
        f->n_tensors++;
    }
    if (check_offsets(f, path, file_size - f->data_start, err))
        goto done;
    f->by_name = malloc(sizeof *f->by_name * (size_t)(f->n_tensors ? f->n_tensors : 1));
    if (!f->by_name) {
        ft_fail(err, "out of host memory reading %s", path);
        goto done;
    }
    for (int i = 0; i < f->n_tensors; i++)
        f->by_name[i] = i;
    sort_base = f->tensors;
    qsort(f->by_name, (size_t)f->n_tensors, sizeof *f->by_name, cmp_name_idx);
    /* jansson already rejects duplicate keys; keep the invariant explicit for lookup */
    for (int i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[f->by_name[i]].name, f->tensors[f->by_name[i - 1]].name) == 0) {
            ft_fail(err, "%s: tensor '%s' appears twice in the header", path,
                    f->tensors[f->by_name[i]].name);
            goto done;
        }
    f->path = dup_str(path);
    if (!f->path) {
        ft_fail(err, "out of host memory reading %s", path);
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    if (rc)
        ft_st_close(f);
    return rc;
}

int ft_st_open(ft_st_file *f, const char *path, unsigned flags, ft_error *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    /* O_NONBLOCK open: a FIFO named model.safetensors is refused, not waited on */
    int fd;
    uint64_t size;
    unsigned char len8[8];
    if (ft_input_open(path, "a safetensors file", FT_INPUT_UNBOUNDED, &fd, &size, err))
        return -1;
    if (size < 8 || pread_full(fd, len8, 8, 0)) {
        close(fd);
        return ft_fail(err, "%s: only %llu bytes, too short for a safetensors file", path,
                       (unsigned long long)size);
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n > FT_ST_MAX_HEADER || n > size - 8) {
        close(fd);
        return ft_fail(err, "%s: header length %llu is %s (corrupt, truncated or not a "
                       "safetensors file)", path, (unsigned long long)n,
                       n > FT_ST_MAX_HEADER ? "over the 100 MB limit" : "larger than the file");
    }
    char *json = malloc(n ? (size_t)n : 1);
    if (!json) {
        close(fd);
        return ft_fail(err, "out of host memory reading %s", path);
    }
    if (pread_full(fd, json, (size_t)n, 8)) {
        free(json);
        close(fd);
        return ft_fail(err, "%s: cannot read the header: %s", path, strerror(errno));
    }
    int rc = ft_st_parse_header(f, path, json, n, size, flags, err);
    free(json);
    if (rc) {
        close(fd);
        return -1;
    }
    f->fd = fd;
    return 0;
}

const ft_st_tensor *ft_st_find(const ft_st_file *f, const char *name)
{
    int lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0)
            return &f->tensors[f->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *ft_st_meta(const ft_st_file *f, const char *key)
{
    return map_lookup(f->meta_keys, f->meta_values, f->n_meta, key);
}

int ft_st_read(const ft_st_file *f, const ft_st_tensor *t, uint64_t offset, void *buf, size_t n,
               ft_error *err)
{
    uint64_t bytes = ft_st_tensor_bytes(t);
    if (offset > bytes || n > bytes - offset)
        return ft_fail(err, "%s: tensor '%s': read of bytes [%llu, %llu) past its %llu bytes",
                       f->path, t->name, (unsigned long long)offset,
                       (unsigned long long)(offset + n), (unsigned long long)bytes);
    if (pread_full(f->fd, buf, n, f->data_start + t->begin + offset))
        return ft_fail(err, "%s: tensor '%s': cannot read its data (%s; file truncated or "
                       "changed since it was opened?)", f->path, t->name,
                       errno ? strerror(errno) : "end of file");
    return 0;
}

/* ------------------------------------------------------------------ writer */

char *ft_st_build_header(const ft_st_spec *specs, int n, const char *const *meta_keys,
                         const char *const *meta_values, int n_meta, size_t *len,
                         ft_error *err)
{
    json_t *root = json_object();
    char *text = NULL, *out = NULL;
    if (!root)
        goto oom;
    if (n_meta > 0) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, "__metadata__", m))
            goto oom;
        for (int i = 0; i < n_meta; i++)
            if (json_object_set_new(m, meta_keys[i], json_string(meta_values[i])))
                goto oom;
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const ft_st_spec *s = &specs[i];
        if (strcmp(s->name, "__metadata__") == 0 || json_object_get(root, s->name)) {
            ft_fail(err, "safetensors writer: tensor name '%s' is %s", s->name,
                    strcmp(s->name, "__metadata__") == 0 ? "reserved" : "given twice");
            goto fail;
        }
        if (s->ndim < 0 || s->ndim > FT_ST_MAX_DIMS || (unsigned)s->dtype >= FT_ST_N_DTYPES) {
            ft_fail(err, "safetensors writer: tensor '%s' has a bad dtype or rank", s->name);
            goto fail;
        }
        uint64_t bytes = dtypes[s->dtype].size;
        json_t *shape = json_array(), *offs = json_array(), *e = json_object();
        if (!shape || !offs || !e) {
            json_decref(shape);
            json_decref(offs);
            json_decref(e);
            goto oom;
        }
        for (int d = 0; d < s->ndim; d++) {
            bytes *= s->shape[d];
            json_array_append_new(shape, json_integer((json_int_t)s->shape[d]));
        }
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + bytes)));
        off += bytes;
        /* key order as in the reference files: dtype, shape, data_offsets */
        json_object_set_new(e, "dtype", json_string(dtypes[s->dtype].name));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        if (json_object_set_new(root, s->name, e))
            goto oom;
    }
    text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text)
        goto oom;
    size_t tl = strlen(text);
    size_t hl = (tl + 7) / 8 * 8; /* pad with spaces so data starts 8-byte aligned */
    out = malloc(8 + hl);
    if (!out)
        goto oom;
    for (int i = 0; i < 8; i++)
        out[i] = (char)(((uint64_t)hl >> (8 * i)) & 0xff);
    memcpy(out + 8, text, tl);
    memset(out + 8 + tl, ' ', hl - tl);
    *len = 8 + hl;
    free(text);
    json_decref(root);
    return out;
oom:
    ft_fail(err, "out of host memory building a safetensors header");
fail:
    free(text);
    json_decref(root);
    return NULL;
}

int ft_st_writer_open(ft_st_writer *w, const char *path, const ft_st_spec *specs, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta,
                      ft_error *err)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    size_t len;
    char *hdr = ft_st_build_header(specs, n, meta_keys, meta_values, n_meta, &len, err);
    if (!hdr)
        return ft_fail_context(err, "%s", path);
    for (int i = 0; i < n; i++) {
        uint64_t b = dtypes[specs[i].dtype].size;
        for (int d = 0; d < specs[i].ndim; d++)
            b *= specs[i].shape[d];
        w->total += b;
    }
    w->header_len = len - 8;
    w->path = dup_str(path);
    if (!w->path) {
        free(hdr);
        return ft_fail(err, "out of host memory");
    }
    /* made new (util/output_file.h): never written through a symlink planted there */
    if (ft_output_create_tmp(path, 0644, &w->fd, err)) {
        free(hdr);
        free(w->path);
        w->path = NULL;
        return -1;
    }
    int rc = write_full(w->fd, hdr, len);
    free(hdr);
    if (rc) {
        ft_fail(err, "%s: cannot write the header: %s", path, strerror(errno));
        ft_st_writer_abort(w);
        return -1;
    }
    return 0;
}

int ft_st_writer_append(ft_st_writer *w, const void *data, size_t n, ft_error *err)
{
    if (n > w->total - w->written)
        return ft_fail(err, "%s: safetensors writer: %zu bytes more than the header announces",
                       w->path, n - (size_t)(w->total - w->written));
    if (write_full(w->fd, data, n))
        return ft_fail(err, "%s: write failed: %s (disk full?)", w->path, strerror(errno));
    w->written += n;
    return 0;
}

int ft_st_writer_close(ft_st_writer *w, ft_error *err)
{
    int rc = 0;
    if (w->written != w->total)
        rc = ft_fail(err, "%s: safetensors writer: closed after %llu of %llu data bytes",
                     w->path, (unsigned long long)w->written, (unsigned long long)w->total);
    else if (fsync(w->fd) != 0)
        rc = ft_fail(err, "%s: fsync failed: %s", w->path, strerror(errno));
    if (close(w->fd) != 0 && !rc)
        rc = ft_fail(err, "%s: close failed: %s", w->path, strerror(errno));
    w->fd = -1;
    free(w->path);
    w->path = NULL;
    return rc;
}

void ft_st_writer_abort(ft_st_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->path)
        unlink(w->path);
    free(w->path);
    w->path = NULL;
    w->fd = -1;
}

/* ------------------------------------------------------------ sharded index */

void ft_st_index_free(ft_st_index *idx)
{
    for (int i = 0; i < idx->n; i++) {
        free(idx->names[i]);
        free(idx->files[i]);
    }
    for (int i = 0; i < idx->n_files; i++)
        free(idx->unique_files[i]);
    free(idx->names);
    free(idx->files);
    free(idx->unique_files);
    memset(idx, 0, sizeof *idx);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A shard must be a file next to the index: no directories, no "..". */
static bool plain_file_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

int ft_st_index_read(ft_st_index *idx, const char *path, ft_error *err)
{
    memset(idx, 0, sizeof *idx);
    json_error_t je;
    char *text;
    size_t len;
    if (ft_input_read(path, "a safetensors index", FT_INPUT_MAX_JSON, &text, &len, err))
        return -1;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root)
        return ft_fail(err, "%s:%d: not valid JSON: %s", path, je.line, je.text);
    int rc = -1;
    json_t *map = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(map)) {
        ft_fail(err, "%s: no \"weight_map\" object (not a safetensors index?)", path);
        goto done;
    }
    size_t n = json_object_size(map);
    idx->names = calloc(n ? n : 1, sizeof *idx->names);
    idx->files = calloc(n ? n : 1, sizeof *idx->files);
    idx->unique_files = calloc(n ? n : 1, sizeof *idx->unique_files);
    if (!idx->names || !idx->files || !idx->unique_files) {
        ft_fail(err, "out of host memory reading %s", path);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v) {
        if (!json_is_string(v) || !plain_file_name(json_string_value(v))) {
            ft_fail(err, "%s: weight_map entry '%s' must name a shard file in the same "
                    "directory", path, k);
            goto done;
        }
        idx->names[idx->n] = dup_str(k);
        idx->files[idx->n] = dup_str(json_string_value(v));
        idx->n++;
        if (!idx->names[idx->n - 1] || !idx->files[idx->n - 1]) {
            ft_fail(err, "out of host memory reading %s", path);
            goto done;
        }
    }
    /* distinct shard names: sort a copy of the pointers, then keep the first of each run */
    char **tmp = malloc(sizeof *tmp * (n ? n : 1));
    if (!tmp) {
        ft_fail(err, "out of host memory reading %s", path);
        goto done;
    }
    memcpy(tmp, idx->files, sizeof *tmp * n);
    qsort(tmp, n, sizeof *tmp, cmp_str);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || strcmp(tmp[i], tmp[i - 1]) != 0) {
            idx->unique_files[idx->n_files] = dup_str(tmp[i]);
            if (!idx->unique_files[idx->n_files++]) {
                free(tmp);
                ft_fail(err, "out of host memory reading %s", path);
                goto done;
            }
        }
    free(tmp);
    rc = 0;
done:
    json_decref(root);
    if (rc)
        ft_st_index_free(idx);
    return rc;
}

const char *ft_st_index_lookup(const ft_st_index *idx, const char *name)
{
    return map_lookup(idx->names, idx->files, idx->n, name);
}

int ft_st_index_write(const char *path, uint64_t total_size, const char *const *names,
                      const char *const *files, int n, ft_error *err)
{
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    int rc = -1;
    if (!root || !meta || !map) {
        json_decref(meta);
        json_decref(map);
        goto done;
    }
    json_object_set_new(meta, "total_size", json_integer((json_int_t)total_size));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "weight_map", map);
    for (int i = 0; i < n; i++)
        if (json_object_set_new(map, names[i], json_string(files[i])))
            goto done;
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text)
        goto done;
    int fd; /* made new (util/output_file.h): never written through a planted symlink */
    if (ft_output_create_tmp(path, 0644, &fd, err)) {
        free(text);
        json_decref(root);
        return -1;
    }
    size_t tl = strlen(text);
    text[tl] = '\n'; /* json_dumps' NUL becomes the final newline */
    if (write_full(fd, text, tl + 1) || fsync(fd) != 0) {
        ft_fail(err, "%s: cannot write: %s", path, strerror(errno));
        close(fd);
        free(text);
        json_decref(root);
        return -1;
    }
    free(text);
    rc = close(fd) == 0 ? 0 : ft_fail(err, "%s: close failed: %s", path, strerror(errno));
    json_decref(root);
    return rc;
done:
    json_decref(root);
    return ft_fail(err, "%s: out of host memory building the index", path);
}
