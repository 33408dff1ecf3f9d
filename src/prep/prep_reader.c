#include "prep/prep_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer/tok_utf8.h"
#include "util/input_file.h"

/* Well-formed by the tokenizer's rules (tokenizer/tok_utf8.h: Unicode Table 3-7). */
long prep_utf8_invalid_at(const char *str, size_t n)
{
    size_t valid = tok_utf8_valid_prefix(str, n);
    return valid < n ? (long)valid : -1;
}

static int open_file(const char *path, FILE **f, uint64_t *size, ft_error *err)
{
    /* a FIFO would block (and cannot be split by byte ranges), /dev/zero never end */
    int fd;
    *f = NULL;
    if (ft_input_open(path, "a JSON, JSONL or text file", FT_INPUT_UNBOUNDED, &fd, size, err))
        return -1;
    if (!(*f = fdopen(fd, "rb"))) {
        close(fd);
        return ft_fail(err, "%s: cannot open: %s", path, strerror(errno));
    }
    return 0;
}

/* A line of at most FT_INPUT_MAX_LINE bytes: a file without newlines (binary, zeros)
 * ends with one line instead of being read into memory whole. */
static long next_line(const char *path, char **line, size_t *cap, FILE *f, ft_error *err)
{
    long k = ft_input_getline(line, cap, f, FT_INPUT_MAX_LINE);
    if (k == -2)
        ft_fail(err, "%s: a line longer than %.0f MB: not a JSONL or text file?", path,
                (double)FT_INPUT_MAX_LINE / 1e6);
    else if (k == -3)
        ft_fail(err, "%s: out of memory reading a line", path);
    return k;
}

/* Skips a UTF-8 byte order mark and blanks; returns the first other byte or EOF. */
static int first_byte(FILE *f)
{
    int c = getc(f);
    if (c == 0xef) {
        int c2 = getc(f), c3 = getc(f);
        if (c2 != 0xbb || c3 != 0xbf)
            return c;
        c = getc(f);
    }
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        c = getc(f);
    return c;
}

static void chomp(char *line, size_t *n)
{
    if (*n && line[*n - 1] == '\n')
        (*n)--;
    if (*n && line[*n - 1] == '\r')
        (*n)--;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

/* One line: UTF-8 check, then JSON object (or raw text). */
static int one_line(char *line, size_t n, prep_input_kind kind, int64_t where,
                    const prep_reader_cb *cb, ft_error *err)
{
    char problem[200];
    long bad = prep_utf8_invalid_at(line, n);
    if (bad >= 0) {
        snprintf(problem, sizeof problem, "not valid UTF-8 (byte %ld of the line)", bad + 1);
        return cb->bad(cb->ctx, where, problem, err);
    }
    if (kind == PREP_INPUT_TEXT_LINES)
        return cb->record(cb->ctx, NULL, line, n, where, err);
    json_error_t je;
    json_t *obj = json_loadb(line, n, JSON_ALLOW_NUL, &je);
    if (!obj) {
        snprintf(problem, sizeof problem, "invalid JSON (column %d): %s", je.column, je.text);
        return cb->bad(cb->ctx, where, problem, err);
    }
    int rc;
    if (!json_is_object(obj))
        rc = cb->bad(cb->ctx, where, "not a JSON object", err);
    else
        rc = cb->record(cb->ctx, obj, NULL, 0, where, err);
    json_decref(obj);
    return rc;
}

static int read_lines(const char *path, FILE *f, uint64_t size, prep_input_kind kind, int rank,
                      int nranks, const prep_reader_cb *cb, prep_read_result *res, ft_error *err)
{
    uint64_t start = size * (uint64_t)rank / (uint64_t)nranks;
    uint64_t end = size * (uint64_t)(rank + 1) / (uint64_t)nranks;
    char *line = NULL;
    size_t cap = 0;
    uint64_t pos = start;
    int rc = 0;
    if (start > 0) {
        /* The line that straddles `start` belongs to the previous rank. */
        if (fseeko(f, (off_t)(start - 1), SEEK_SET) != 0)
            rc = ft_fail(err, "%s: cannot seek: %s", path, strerror(errno));
        else if (getc(f) != '\n') {
            long k = next_line(path, &line, &cap, f, err);
            if (k < -1)
                rc = -1;
            pos = start + (k > 0 ? (uint64_t)k : 0);
        }
    } else {
        rewind(f);
    }
    while (rc == 0 && pos < end) {
        errno = 0;
        long k = next_line(path, &line, &cap, f, err);
        if (k < -1) {
            rc = -1;
            break;
        }
        if (k < 0) {
            if (ferror(f))
                rc = ft_fail(err, "%s: read error: %s", path, strerror(errno));
            break;
        }
        pos += (uint64_t)k;
        res->lines++;
        size_t n = (size_t)k, skip = 0;
        if (res->lines == 1 && start == 0 && n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
            skip = 3; /* UTF-8 byte order mark */
        chomp(line, &n);
        if (blank(line + skip, n - skip))
            continue;
        rc = one_line(line + skip, n - skip, kind, res->lines, cb, err);
    }
    free(line);
    return rc;
}

static int read_array(const char *path, int rank, int nranks, const prep_reader_cb *cb,
                      ft_error *err)
{
    json_error_t je;
    json_t *arr = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!arr)
        return ft_fail(err, "%s:%d: invalid JSON array file (column %d): %s", path, je.line,
                       je.column, je.text);
    if (!json_is_array(arr)) {
        json_decref(arr);
        return ft_fail(err, "%s: expected a JSON array of records", path);
    }
    size_t n = json_array_size(arr);
    size_t b = n * (size_t)rank / (size_t)nranks, e = n * (size_t)(rank + 1) / (size_t)nranks;
    int rc = 0;
    for (size_t i = b; i < e && rc == 0; i++) {
        json_t *obj = json_array_get(arr, i);
        rc = json_is_object(obj) ? cb->record(cb->ctx, obj, NULL, 0, (int64_t)i + 1, err)
                                 : cb->bad(cb->ctx, (int64_t)i + 1, "not a JSON object", err);
    }
    json_decref(arr);
    return rc;
}

static int read_text_file(const char *path, FILE *f, uint64_t size, const prep_reader_cb *cb,
                          ft_error *err)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return ft_fail(err, "%s: out of host memory (%llu bytes)", path, (unsigned long long)size);
    rewind(f);
    size_t got = fread(buf, 1, size, f);
    int rc;
    if (got != size) {
        rc = ft_fail(err, "%s: read error", path);
    } else {
        size_t skip = size >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
        long bad = prep_utf8_invalid_at(buf + skip, size - skip);
        char problem[120];
        if (bad >= 0) {
            snprintf(problem, sizeof problem, "not valid UTF-8 (byte %ld)", bad + 1 + (long)skip);
            rc = cb->bad(cb->ctx, 1, problem, err);
        } else if (blank(buf + skip, size - skip)) {
            rc = 0; /* an empty file is no document */
        } else {
            rc = cb->record(cb->ctx, NULL, buf + skip, size - skip, 1, err);
        }
    }
    free(buf);
    return rc;
}

int prep_read_share(const char *path, int file_index, prep_input_kind kind, int rank, int nranks,
                    const prep_reader_cb *cb, prep_read_result *res, ft_error *err)
{
    memset(res, 0, sizeof *res);
    FILE *f;
    uint64_t size;
    if (open_file(path, &f, &size, err))
        return -1;
    int rc;
    if (kind == PREP_INPUT_TEXT_FILE) {
        res->where_is_global = true;
        rc = file_index % nranks == rank ? read_text_file(path, f, size, cb, err) : 0;
    } else if (kind == PREP_INPUT_JSON && first_byte(f) == '[') {
        res->where_is_global = res->array = true;
        rc = read_array(path, rank, nranks, cb, err);
    } else {
        rc = read_lines(path, f, size, kind, rank, nranks, cb, res, err);
    }
    fclose(f);
    return rc;
}

/* ---- format detection ---- */

int prep_detect_file_format(const char *path, prep_format *fmt, ft_error *err)
{
    *fmt = PREP_FORMAT_AUTO;
    FILE *f;
    uint64_t size;
    if (open_file(path, &f, &size, err))
        return -1;
    int rc = 0;
    if (first_byte(f) == '[') {
        json_error_t je;
        json_t *arr = json_load_file(path, JSON_ALLOW_NUL, &je);
        if (!arr) {
            rc = ft_fail(err, "%s:%d: invalid JSON array file (column %d): %s", path, je.line,
                         je.column, je.text);
        } else {
            for (size_t i = 0; i < json_array_size(arr) && *fmt == PREP_FORMAT_AUTO; i++)
                *fmt = prep_detect_format(json_array_get(arr, i));
            json_decref(arr);
        }
    } else {
        rewind(f);
        char *line = NULL;
        size_t cap = 0;
        long k = 0;
        while (*fmt == PREP_FORMAT_AUTO && (k = next_line(path, &line, &cap, f, err)) >= 0) {
            json_t *obj = json_loadb(line, (size_t)k, JSON_ALLOW_NUL, NULL);
            *fmt = prep_detect_format(obj);
            json_decref(obj);
        }
        if (k < -1)
            rc = -1;
        free(line);
    }
    fclose(f);
    return rc;
}
