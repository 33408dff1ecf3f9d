/* CPU backend memory: alignment, zero fill, byte accounting, transfers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend_test_util.h"

static void test_create_identity(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    assert_string_equal(be->name, "cpu");
    assert_true(be->host_memory); /* the trainer's RSS peak and RAM preflight rely on it */
    assert_int_equal(be->device, -1);
    assert_int_equal(be->bytes_in_use, 0);
    assert_int_equal(be->peak_bytes, 0);
    ft_backend_destroy(be);
    ft_backend_destroy(NULL);
}

static void test_unknown_isa_is_an_error(void **state)
{
    (void)state;
    setenv("FT_CPU_ISA", "sse9", 1);
    ft_backend *be = NULL;
    ft_error err;
    assert_int_equal(ft_backend_cpu_create(&be, &err), -1);
    assert_null(be);
    assert_non_null(strstr(err.msg, "FT_CPU_ISA"));
    unsetenv("FT_CPU_ISA");
}

/* Sizes around the 64-byte unit and past the parallel-fill threshold (4 MiB). */
static void test_alloc_aligned_and_zeroed(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const size_t sizes[] = {0, 1, 3, 63, 64, 65, 4096, 100003, (size_t)9 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        /* Dirty the heap first so a zeroed block is not an accident. */
        unsigned char *dirty = be->ops->alloc(be, sizes[i] + 1);
        memset(dirty, 0xAB, sizes[i] + 1);
        be->ops->free(be, dirty);
        unsigned char *p = be->ops->alloc(be, sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t j = 0; j < sizes[i]; j++)
            if (p[j] != 0)
                fail_msg("byte %zu of a %zu-byte block is %u", j, sizes[i], p[j]);
        be->ops->free(be, p);
    }
    assert_int_equal(be->bytes_in_use, 0);
    ft_backend_destroy(be);
}

static void test_accounting(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    void *a = be->ops->alloc(be, 1000);
    void *b = be->ops->alloc(be, 24);
    assert_int_equal(be->bytes_in_use, 1024);
    assert_int_equal(be->peak_bytes, 1024);
    be->ops->free(be, a);
    assert_int_equal(be->bytes_in_use, 24);
    assert_int_equal(be->peak_bytes, 1024);
    void *c = be->ops->alloc(be, 500);
    assert_int_equal(be->bytes_in_use, 524);
    assert_int_equal(be->peak_bytes, 1024);
    void *d = be->ops->alloc(be, 2000);
    assert_int_equal(be->bytes_in_use, 2524);
    assert_int_equal(be->peak_bytes, 2524);
    be->ops->free(be, NULL); /* no-op */
    be->ops->free(be, b);
    be->ops->free(be, c);
    be->ops->free(be, d);
    assert_int_equal(be->bytes_in_use, 0);
    assert_int_equal(be->peak_bytes, 2524);
    assert_null(be->ops->alloc(be, SIZE_MAX - 8)); /* impossible size: NULL, no accounting */
    assert_int_equal(be->bytes_in_use, 0);
    ft_backend_destroy(be);
}

static void test_transfers(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const size_t sizes[] = {1, 777, (size_t)6 << 20}; /* the last one takes the parallel path */
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *host = malloc(n), *back = malloc(n);
        for (size_t j = 0; j < n; j++)
            host[j] = (unsigned char)(j * 131 + 7);
        unsigned char *a = be->ops->alloc(be, n), *b = be->ops->alloc(be, n);
        be->ops->upload(be, a, host, n);
        be->ops->copy(be, b, a, n);
        be->ops->sync(be);
        be->ops->download(be, back, b, n);
        assert_memory_equal(host, back, n);
        be->ops->zero(be, b, n);
        be->ops->download(be, back, b, n);
        for (size_t j = 0; j < n; j++)
            assert_int_equal(back[j], 0);
        be->ops->free(be, a);
        be->ops->free(be, b);
        free(host), free(back);
    }
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_identity),
        cmocka_unit_test(test_unknown_isa_is_an_error),
        cmocka_unit_test(test_alloc_aligned_and_zeroed),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_transfers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
