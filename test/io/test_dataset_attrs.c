/* The dataset reader's checks of the root attributes (src/io/dataset.c, src/io/h5file.c):
 * attributes that are arrays where one value is expected, and values that
 * do not fit the reader's int fields are refused with one line naming the file and the
 * attribute, never narrowed (fuzz_h5_dataset found seq_len = INT_MAX overflowing
 * seq_len + 1; test/fuzz/corpus/h5_dataset/regress-seq-len-int-max). */
#include <mpi.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/dataset.h"

#define ROWS 2
#define SEQ 3

static char path[64];

static void write_valid(void)
{
    ft_dataset_info info = { .rows = ROWS, .seq_len = SEQ, .vocab_size = 10, .bos_token_id = 1,
                             .eos_token_id = 2, .pad_token_id = -1, .n_documents = 2,
                             .n_target_tokens = 4, .tokenizer_hash = "abc", .template_name = "t" };
    uint32_t tokens[ROWS * (SEQ + 1)] = { 0 };
    uint8_t mask[ROWS * (SEQ + 1)] = { 0 };
    int32_t segment[ROWS * (SEQ + 1)] = { 0 };
    ft_error err;
    if (ft_dataset_write(path, &info, tokens, mask, segment, &err))
        fail_msg("%s", err.msg);
}

static void set_attr(const char *name, int64_t v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    H5Adelete(f, name);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(s);
    H5Fclose(f);
}

static void expect_refused(const char *name, int64_t v, const char *fragment)
{
    write_valid();
    set_attr(name, v);
    ft_dataset ds;
    ft_error err;
    assert_int_equal(ft_dataset_open(&ds, path, MPI_COMM_NULL, &err), -1);
    if (!strstr(err.msg, path) || !strstr(err.msg, fragment))
        fail_msg("expected '%s' naming %s, got: %s", fragment, path, err.msg);
}

static void test_out_of_range(void **state)
{
    (void)state;
    expect_refused("seq_len", 0x7fffffff, "seq_len = 2147483647 is out of range 1..2147483646");
    expect_refused("seq_len", 0x100000000LL + SEQ, "seq_len = 4294967299 is out of range");
    expect_refused("seq_len", 0, "seq_len = 0 is out of range");
    expect_refused("vocab_size", -5, "vocab_size = -5 is out of range 1..");
    expect_refused("vocab_size", 0x80000000LL, "vocab_size = 2147483648 is out of range");
    expect_refused("pad_token_id", -2, "pad_token_id = -2 is out of range -1..");
    expect_refused("n_documents", -1, "n_documents = -1 is out of range 0..");
}

/* An attribute with several elements where one value is expected: HDF5 writes them all,
 * which overran the reader's scalar (fuzz_h5_weights: stack-buffer-overflow; corpus
 * test/fuzz/corpus/h5_weights/regress-array-attribute). */
static void test_array_attribute(void **state)
{
    (void)state;
    static const char *const names[] = { "format_version", "seq_len", "ftmpi_format" };
    for (int i = 0; i < 3; i++) {
        write_valid();
        hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        assert_true(f >= 0);
        H5Adelete(f, names[i]);
        hsize_t n = 4;
        hid_t s = H5Screate_simple(1, &n, NULL);
        const bool str = i == 2;
        hid_t t = H5Tcopy(str ? H5T_C_S1 : H5T_STD_I64LE);
        if (str)
            H5Tset_size(t, 8);
        hid_t a = H5Acreate2(f, names[i], t, s, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(a >= 0);
        char data[64] = "dataset\0dataset\0dataset\0dataset";
        H5Awrite(a, str ? t : H5T_NATIVE_INT64, data);
        H5Aclose(a);
        H5Tclose(t);
        H5Sclose(s);
        H5Fclose(f);
        ft_dataset ds;
        ft_error err;
        assert_int_equal(ft_dataset_open(&ds, path, MPI_COMM_NULL, &err), -1);
        if (!strstr(err.msg, str ? "not an ftmpi dataset file" : "is not a single value"))
            fail_msg("%s: %s", names[i], err.msg);
    }
}

static void test_valid_still_opens(void **state)
{
    (void)state;
    write_valid();
    ft_dataset ds;
    ft_error err;
    if (ft_dataset_open(&ds, path, MPI_COMM_NULL, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(ds.info.seq_len, SEQ);
    assert_int_equal(ds.info.pad_token_id, -1);
    ft_dataset_close(&ds);
}

static void set_str_attr(const char *name, const char *v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    H5Adelete(f, name);
    hid_t s = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0);
    H5Awrite(a, t, v);
    H5Aclose(a);
    H5Tclose(t);
    H5Sclose(s);
    H5Fclose(f);
}

/* tokenizer_fingerprint (io/tok_fingerprint.h): optional, 16 hex digits when present */
static void test_tokenizer_fingerprint(void **state)
{
    (void)state;
    ft_dataset ds;
    ft_error err;
    write_valid(); /* a file from before fingerprints: opens, with none */
    if (ft_dataset_open(&ds, path, MPI_COMM_NULL, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(ds.info.tokenizer_fingerprint, "");
    ft_dataset_close(&ds);
    set_str_attr("tokenizer_fingerprint", "0123456789abcdef");
    if (ft_dataset_open(&ds, path, MPI_COMM_NULL, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(ds.info.tokenizer_fingerprint, "0123456789abcdef");
    ft_dataset_close(&ds);
    static const char *const bad[] = { "0123", "0123456789ABCDEF", "0123456789abcdefg", "" };
    for (int i = 0; i < 4; i++) {
        set_str_attr("tokenizer_fingerprint", bad[i]);
        assert_int_equal(ft_dataset_open(&ds, path, MPI_COMM_NULL, &err), -1);
        if (!strstr(err.msg, path) || !strstr(err.msg, "tokenizer_fingerprint is not 16 hex digits"))
            fail_msg("'%s': %s", bad[i], err.msg);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv); /* ft_dataset_write writes on MPI_COMM_SELF */
    snprintf(path, sizeof path, "/tmp/ftmpi_dataset_attrs_%d.h5", (int)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_still_opens),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_array_attribute),
        cmocka_unit_test(test_tokenizer_fingerprint),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(path);
    MPI_Finalize();
    return rc;
}
