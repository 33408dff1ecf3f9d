/* Unit tests of the safetensors reader/writer (src/io/safetensors.c): the exact
 * bytes of the reference example, a write/read round trip, the sharded index, and a
 * table of corrupt files that must each fail with one clear message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/safetensors.h"

static char tmpdir[256];

static void path_in_tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Writes an 8-byte length (header_len, or strlen(json) when header_len is 0), the
 * JSON, then data_len data bytes (0..255 pattern). */
static void write_raw(const char *path, const char *json, uint64_t header_len, size_t data_len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    uint64_t n = header_len ? header_len : strlen(json);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(n >> (8 * i));
    fwrite(len8, 1, 8, fp);
    fwrite(json, 1, strlen(json), fp);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), fp);
    fclose(fp);
}

static void test_reference_bytes(void **state)
{
    (void)state;
    /* The reference example: "attn.0" F32 [1,2,3] -> N = 64, no padding. */
    const char *hdr = "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    assert_int_equal(strlen(hdr), 64);
    ft_st_spec spec = { .name = "attn.0", .dtype = FT_ST_F32, .ndim = 3, .shape = { 1, 2, 3 } };
    ft_error err;
    size_t len;
    char *bytes = ft_st_build_header(&spec, 1, NULL, NULL, 0, &len, &err);
    assert_non_null(bytes);
    assert_int_equal(len, 72);
    static const unsigned char n64[8] = { 0x40, 0, 0, 0, 0, 0, 0, 0 };
    assert_memory_equal(bytes, n64, 8);
    assert_memory_equal(bytes + 8, hdr, 64);
    free(bytes);

    /* ... and the reader accepts exactly those bytes plus 24 data bytes */
    char path[512];
    path_in_tmp(path, sizeof path, "ref.safetensors");
    write_raw(path, hdr, 0, 24);
    ft_st_file f;
    assert_int_equal(ft_st_open(&f, path, 0, &err), 0);
    assert_int_equal(f.header_len, 64);
    assert_int_equal(f.n_tensors, 1);
    const ft_st_tensor *t = ft_st_find(&f, "attn.0");
    assert_non_null(t);
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->shape[2], 3);
    assert_int_equal(ft_st_tensor_numel(t), 6);
    unsigned char buf[8];
    assert_int_equal(ft_st_read(&f, t, 16, buf, 8, &err), 0);
    assert_int_equal(buf[0], 16);
    assert_int_equal(buf[7], 23);
    assert_int_not_equal(ft_st_read(&f, t, 20, buf, 8, &err), 0); /* past the tensor */
    ft_st_close(&f);

    /* empty file: {} padded with 6 spaces */
    bytes = ft_st_build_header(NULL, 0, NULL, NULL, 0, &len, &err);
    assert_int_equal(len, 16);
    assert_memory_equal(bytes + 8, "{}      ", 8);
    free(bytes);
    /* second reference example: "attn0" [1,1,2,3] needs 7 pad spaces to N = 72 */
    ft_st_spec s2 = { .name = "attn0", .dtype = FT_ST_F32, .ndim = 4, .shape = { 1, 1, 2, 3 } };
    bytes = ft_st_build_header(&s2, 1, NULL, NULL, 0, &len, &err);
    assert_int_equal(len, 80);
    assert_int_equal((unsigned char)bytes[0], 72);
    assert_memory_equal(bytes + 8 + 65, "       ", 7);
    free(bytes);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "rt.safetensors");
    ft_st_spec specs[3] = {
        { .name = "b.weight", .dtype = FT_ST_F32, .ndim = 2, .shape = { 3, 5 } },
        { .name = "a.norm", .dtype = FT_ST_BF16, .ndim = 1, .shape = { 7 } },
        { .name = "empty", .dtype = FT_ST_BF16, .ndim = 2, .shape = { 0, 4 } },
    };
    const char *mk[] = { "format" }, *mv[] = { "pt" };
    ft_st_writer w;
    ft_error err;
    assert_int_equal(ft_st_writer_open(&w, path, specs, 3, mk, mv, 1, &err), 0);
    assert_int_equal(w.header_len % 8, 0);
    float a[15];
    uint16_t b[7];
    for (int i = 0; i < 15; i++)
        a[i] = (float)i * 0.5f;
    for (int i = 0; i < 7; i++)
        b[i] = (uint16_t)(0x3f80 + i);
    /* appended in odd pieces */
    assert_int_equal(ft_st_writer_append(&w, a, 10, &err), 0);
    assert_int_equal(ft_st_writer_append(&w, (char *)a + 10, 50, &err), 0);
    assert_int_equal(ft_st_writer_append(&w, b, 14, &err), 0);
    assert_int_not_equal(ft_st_writer_append(&w, b, 2, &err), 0); /* more than announced */
    assert_int_equal(ft_st_writer_close(&w, &err), 0);

    ft_st_file f;
    assert_int_equal(ft_st_open(&f, path, 0, &err), 0);
    assert_string_equal(ft_st_meta(&f, "format"), "pt");
    assert_int_equal(f.data_start % 8, 0);
    assert_int_equal(f.n_tensors, 3);
    /* file order is offset order */
    assert_string_equal(f.tensors[0].name, "b.weight");
    const ft_st_tensor *t = ft_st_find(&f, "b.weight");
    float ra[15];
    assert_int_equal(ft_st_read(&f, t, 0, ra, sizeof ra, &err), 0);
    assert_memory_equal(ra, a, sizeof a);
    t = ft_st_find(&f, "a.norm");
    uint16_t rb[7];
    assert_int_equal(ft_st_read(&f, t, 0, rb, sizeof rb, &err), 0);
    assert_memory_equal(rb, b, sizeof b);
    assert_non_null(ft_st_find(&f, "empty"));
    assert_null(ft_st_find(&f, "missing"));
    ft_st_close(&f);

    /* closing before all bytes are written is an error */
    assert_int_equal(ft_st_writer_open(&w, path, specs, 1, NULL, NULL, 0, &err), 0);
    assert_int_not_equal(ft_st_writer_close(&w, &err), 0);
    assert_non_null(strstr(err.msg, "closed after 0 of 60"));
    /* duplicate names are refused when building */
    ft_st_spec dup[2] = { specs[0], specs[0] };
    size_t len;
    assert_null(ft_st_build_header(dup, 2, NULL, NULL, 0, &len, &err));
    assert_non_null(strstr(err.msg, "given twice"));
}

static void test_index(void **state)
{
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "model.safetensors.index.json");
    const char *names[] = { "x", "y", "z" };
    const char *files[] = { "model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors",
                            "model-00002-of-00002.safetensors" };
    ft_error err;
    assert_int_equal(ft_st_index_write(path, 1234, names, files, 3, &err), 0);
    ft_st_index idx;
    assert_int_equal(ft_st_index_read(&idx, path, &err), 0);
    assert_int_equal(idx.n, 3);
    assert_int_equal(idx.n_files, 2);
    assert_string_equal(idx.unique_files[0], "model-00001-of-00002.safetensors");
    assert_string_equal(ft_st_index_lookup(&idx, "z"), "model-00002-of-00002.safetensors");
    assert_null(ft_st_index_lookup(&idx, "w"));
    ft_st_index_free(&idx);

    /* a shard path outside the directory is refused */
    FILE *fp = fopen(path, "w");
    fputs("{\"weight_map\":{\"x\":\"../etc/passwd\"}}", fp);
    fclose(fp);
    assert_int_not_equal(ft_st_index_read(&idx, path, &err), 0);
    assert_non_null(strstr(err.msg, "shard file in the same directory"));
}

/* One corrupt file per row: header JSON (or NULL for raw cases), declared header
 * length override, data bytes, and a fragment the error must contain. */
typedef struct bad_case {
    const char *what;
    const char *json;
    uint64_t header_len; /* 0: strlen(json) */
    size_t data;
    const char *expect;
} bad_case;

#define T1(off0, off1, shape, dtype)                                                         \
    "{\"t\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #off0 "," #off1 "]}}"

static const bad_case bad_cases[] = {
    { "header length huge", "{}", 200000000, 0, "over the 100 MB limit" },
    { "header length > file", "{}", 4096, 0, "larger than the file" },
    { "truncated data", T1(0, 24, "[2,3]", "F32"), 0, 20, "truncated file" },
    { "trailing bytes", T1(0, 24, "[2,3]", "F32"), 0, 30, "trailing bytes" },
    { "wrong size for shape", T1(0, 20, "[2,3]", "F32"), 0, 20, "needs 24" },
    { "unknown dtype", T1(0, 24, "[2,3]", "Q4"), 0, 24, "unknown dtype 'Q4'" },
    { "unsupported dtype", T1(0, 48, "[2,3]", "I64"), 0, 48, "dtype I64" },
    { "gap between tensors",
      "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}", 0, 12, "gap" },
    { "overlapping tensors",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 0, 12, "overlap" },
    { "not starting at 0", T1(4, 28, "[2,3]", "F32"), 0, 28, "gap" },
    { "non-string metadata", "{\"__metadata__\":{\"format\":1}}", 0, 0,
      "__metadata__ value of 'format' is not a string" },
    { "metadata not an object", "{\"__metadata__\":\"pt\"}", 0, 0, "__metadata__ is not an object" },
    { "duplicate key",
      "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "duplicate" },
    { "not JSON", "{\"t\":", 0, 0, "not valid JSON" },
    { "not an object", "[1,2]", 0, 0, "does not start with '{'" },
    { "trailing garbage after JSON", "{} x", 0, 0, "not valid JSON" },
    { "negative offset", T1(-4, 20, "[2,3]", "F32"), 0, 24, "data_offsets" },
    { "begin > end", T1(24, 0, "[2,3]", "F32"), 0, 24, "data_offsets" },
    { "shape not integers", T1(0, 24, "[2,\"3\"]", "F32"), 0, 24, "shape[1]" },
    { "missing data_offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, 4, "data_offsets" },
    { "shape overflow", T1(0, 8, "[4294967296,4294967296,4294967296]", "F32"), 0, 8, "overflow" },
    { "invalid UTF-8", "{\"\xff\xfe\":{}}", 0, 0, "not valid JSON" },
};

static void test_corrupt_files(void **state)
{
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "bad.safetensors");
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        write_raw(path, c->json, c->header_len, c->data);
        ft_st_file f;
        ft_error err = { { 0 }, 0 };
        int rc = ft_st_open(&f, path, 0, &err);
        if (rc == 0 || !strstr(err.msg, c->expect) || !strstr(err.msg, path)) {
            fprintf(stderr, "case '%s': rc %d, message '%s' (expected '%s')\n", c->what, rc,
                    err.msg, c->expect);
            if (rc == 0)
                ft_st_close(&f);
            fail();
        }
        assert_null(strchr(err.msg, '\n')); /* one line */
    }
    /* files shorter than the length field */
    FILE *fp = fopen(path, "wb");
    fputs("abc", fp);
    fclose(fp);
    ft_st_file f;
    ft_error err;
    assert_int_not_equal(ft_st_open(&f, path, 0, &err), 0);
    assert_non_null(strstr(err.msg, "too short"));
    /* a missing file */
    path_in_tmp(path, sizeof path, "nope.safetensors");
    assert_int_not_equal(ft_st_open(&f, path, 0, &err), 0);
    assert_non_null(strstr(err.msg, "cannot open"));
    /* FT_ST_ANY_DTYPE accepts I64 (inspect) */
    path_in_tmp(path, sizeof path, "i64.safetensors");
    write_raw(path, T1(0, 48, "[2,3]", "I64"), 0, 48);
    assert_int_equal(ft_st_open(&f, path, FT_ST_ANY_DTYPE, &err), 0);
    ft_st_close(&f);
}

static void test_truncated_after_open(void **state)
{
    (void)state;
    char path[512];
    path_in_tmp(path, sizeof path, "shrink.safetensors");
    write_raw(path, T1(0, 24, "[2,3]", "F32"), 0, 24);
    ft_st_file f;
    ft_error err;
    assert_int_equal(ft_st_open(&f, path, 0, &err), 0);
    assert_int_equal(truncate(path, 8 + (off_t)f.header_len + 10), 0);
    char buf[24];
    assert_int_not_equal(ft_st_read(&f, &f.tensors[0], 0, buf, 24, &err), 0);
    assert_non_null(strstr(err.msg, "tensor 't'"));
    ft_st_close(&f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/ftst.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_bytes),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_corrupt_files),
        cmocka_unit_test(test_truncated_after_open),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
