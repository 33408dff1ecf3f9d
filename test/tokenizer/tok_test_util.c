#include "tok_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* "$ENV/rel", or "fallback/rel" when ENV is unset or empty. */
static char *dir_path(const char *env, const char *fallback, const char *rel)
{
    const char *dir = getenv(env);
    if (!dir || !*dir)
        dir = fallback;
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, rel);
    return p;
}

char *tt_path(const char *rel) { return dir_path("FT_SRCDIR", FT_TEST_SRCDIR, rel); }

char *tt_build_path(const char *rel) { return dir_path("FT_BUILDDIR", FT_TEST_BUILDDIR, rel); }

ft_tokenizer *tt_load(const char *dir)
{
    char rel[256];
    snprintf(rel, sizeof rel, "test/data/tokenizers/%s/tokenizer.json", dir);
    char *path = tt_build_path(rel);
    ft_error err = {{0}, 0};
    ft_tokenizer *t = NULL;
    if (ft_tokenizer_load(path, &t, &err) < 0)
        fail_msg("%s", err.msg);
    free(path);
    return t;
}

/* The whole file at path (malloc'd; path is freed); hint says what to check when it cannot be
 * opened. */
static char *read_whole(char *path, const char *hint, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (%s)", path, hint);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    free(path);
    *len = (size_t)n;
    return buf;
}

char *tt_read(const char *rel, size_t *len)
{
    return read_whole(tt_path(rel), "is FT_SRCDIR the source dir?", len);
}

char *tt_read_built(const char *rel, size_t *len)
{
    return read_whole(tt_build_path(rel), "is FT_BUILDDIR the build dir, and did make check "
                                          "or make tokenizer-data run there?", len);
}

json_t **tt_jsonl(const char *rel, size_t *n)
{
    size_t len;
    char *buf = tt_read(rel, &len);
    size_t cap = 1024, count = 0;
    json_t **rows = malloc(cap * sizeof *rows);
    assert_non_null(rows);
    for (char *line = buf; line < buf + len;) {
        char *nl = memchr(line, '\n', (size_t)(buf + len - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(buf + len - line);
        if (ll > 0) {
            json_error_t je;
            json_t *row = json_loadb(line, ll, JSON_ALLOW_NUL, &je);
            if (!row)
                fail_msg("%s:%zu: %s", rel, count + 1, je.text);
            if (count == cap) {
                cap *= 2;
                rows = realloc(rows, cap * sizeof *rows);
                assert_non_null(rows);
            }
            rows[count++] = row;
        }
        line += ll + 1;
    }
    free(buf);
    *n = count;
    return rows;
}

int32_t *tt_ids(json_t *arr, size_t *n)
{
    assert_true(json_is_array(arr));
    *n = json_array_size(arr);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}
