/* util/path_join: one slash between a directory and a name however the user typed the
 * directory, the root kept, and a result that does not fit reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/path_join.h"

static void expect_join(const char *dir, const char *name, const char *want)
{
    char out[64];
    assert_int_equal(ft_path_join(out, sizeof out, dir, name), 0);
    assert_string_equal(out, want);
}

static void test_slashes(void **state)
{
    (void)state;
    expect_join("ck", "step-000010.h5", "ck/step-000010.h5");
    expect_join("ck/", "step-000010.h5", "ck/step-000010.h5");
    expect_join("ck///", "step-000010.h5", "ck/step-000010.h5");
    expect_join("/data/run/ck/", "latest", "/data/run/ck/latest");
    expect_join("/", "latest", "/latest");
    expect_join("//", "latest", "/latest");
    expect_join("", "latest", "latest");
    expect_join("out/", "", "out/");  /* the directory as shown in a summary line */
    expect_join("out", "", "out/");
    expect_join("a//b/", "c", "a//b/c"); /* only the end is the join's business */
}

static void test_too_long(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(ft_path_join(out, sizeof out, "ck/", "latest"), -1); /* 9 bytes + NUL */
    assert_string_equal(out, "ck/late");
    assert_int_equal(ft_path_join(out, sizeof out, "ck/", "late"), 0); /* 7 bytes + NUL fit */
    assert_string_equal(out, "ck/late");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slashes),
        cmocka_unit_test(test_too_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
