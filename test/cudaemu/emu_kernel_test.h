/* Helpers of the kernel-side harness tests (test_emu_kernels.cu, test_emu_mma.cu): a
 * counting CHECK and a runner for code that must end in a finding. Header-only: each test
 * program includes it once. */
#ifndef FT_EMU_KERNEL_TEST_H
#define FT_EMU_KERNEL_TEST_H

#include <stdio.h>

#include "../common/expect_abort.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* fn(arg) must abort and say `expect` on stderr (test/common/expect_abort.h). Prints
 * "ok   finding: NAME" or counts a failure. */
static void expect_finding(const char *name, void (*fn)(int), int arg, const char *expect)
{
    char said[4096];
    int ok = child_aborts_saying(fn, arg, expect, said, sizeof said);
    CHECK(ok, "%s: want an abort saying \"%s\"; stderr: %s", name, expect, said);
    if (ok)
        printf("ok   finding: %s\n", name);
}

#endif
