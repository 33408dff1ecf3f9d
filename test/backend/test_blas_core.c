/* The choice of an OpenBLAS core for a CPU (util/blas_core.h), on made-up CPUs and
 * libraries: what OpenBLAS 0.3.21 does on CPUs newer than itself (Prescott on Emerald
 * Rapids, Haswell on AVX-512 Zen) is corrected, a choice at the CPU's level or a name
 * this table does not know is left alone, and only cores the library has are chosen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "util/blas_core.h"

/* ctx: a NULL-terminated list of the library's cores (NULL: all of them) */
static int has(const char *name, void *ctx)
{
    if (!ctx)
        return 1;
    for (const char *const *p = ctx; *p; p++)
        if (!strcmp(*p, name))
            return 1;
    return 0;
}

static const char *pick(const char *chosen, ft_blas_isa cpu, int amd, const char *const *lib)
{
    return ft_blas_core_better(chosen, cpu, amd, has, (void *)lib);
}

static void test_levels(void **state)
{
    (void)state;
    assert_int_equal(ft_blas_core_isa("Prescott"), FT_BLAS_ISA_PRE_AVX);
    assert_int_equal(ft_blas_core_isa("NEHALEM"), FT_BLAS_ISA_PRE_AVX);
    assert_int_equal(ft_blas_core_isa("Sandybridge"), FT_BLAS_ISA_AVX);
    assert_int_equal(ft_blas_core_isa("haswell"), FT_BLAS_ISA_AVX2);
    assert_int_equal(ft_blas_core_isa("Zen"), FT_BLAS_ISA_AVX2);
    assert_int_equal(ft_blas_core_isa("SkylakeX"), FT_BLAS_ISA_AVX512);
    assert_int_equal(ft_blas_core_isa("Cooperlake"), FT_BLAS_ISA_AVX512);
    assert_int_equal(ft_blas_core_isa("SapphireRapids"), FT_BLAS_ISA_AVX512);
    assert_int_equal(ft_blas_core_isa("Unknown"), -1);
    assert_int_equal(ft_blas_core_isa("Zen9"), -1);
    assert_int_equal(ft_blas_core_isa(NULL), -1);
}

static void test_fallbacks_are_corrected(void **state)
{
    (void)state;
    /* issue 24: 0.3.21 on an Emerald Rapids Xeon */
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX512, 0, NULL), "SkylakeX");
    /* AVX-512 AMD (Zen 4, Zen 5) gets SkylakeX, not the vendor's AVX2 Zen kernel:
     * measured on a Zen 5 EPYC (2026-11-25, doc/benchmarks.md), sgemm with SkylakeX
     * 430-485 GFLOP/s against Zen's and Haswell's 250-258 */
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX512, 1, NULL), "SkylakeX");
    /* 0.3.21's Zen (AVX2) kernel on an AVX-512 EPYC */
    assert_string_equal(pick("Zen", FT_BLAS_ISA_AVX512, 1, NULL), "SkylakeX");
    assert_string_equal(pick("Haswell", FT_BLAS_ISA_AVX512, 1, NULL), "SkylakeX");
    /* AVX2 CPUs get the vendor's AVX2 kernel; AVX-only ones Sandybridge */
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX2, 0, NULL), "Haswell");
    assert_string_equal(pick("Barcelona", FT_BLAS_ISA_AVX2, 1, NULL), "Zen");
    assert_string_equal(pick("Nehalem", FT_BLAS_ISA_AVX, 0, NULL), "Sandybridge");
}

static void test_right_choices_are_kept(void **state)
{
    (void)state;
    assert_null(pick("SkylakeX", FT_BLAS_ISA_AVX512, 0, NULL));
    assert_null(pick("Cooperlake", FT_BLAS_ISA_AVX512, 1, NULL)); /* this Zen 5 */
    assert_null(pick("SapphireRapids", FT_BLAS_ISA_AVX512, 0, NULL));
    assert_null(pick("Haswell", FT_BLAS_ISA_AVX2, 0, NULL));
    assert_null(pick("Zen", FT_BLAS_ISA_AVX2, 1, NULL));
    assert_null(pick("Excavator", FT_BLAS_ISA_AVX2, 1, NULL));
    assert_null(pick("Prescott", FT_BLAS_ISA_PRE_AVX, 0, NULL));
    /* a stronger kernel than we detect (a user's or a newer library's) is not lowered */
    assert_null(pick("SkylakeX", FT_BLAS_ISA_AVX2, 0, NULL));
    /* names of a newer OpenBLAS are its business */
    assert_null(pick("Zen9", FT_BLAS_ISA_AVX512, 1, NULL));
    assert_null(pick("Unknown", FT_BLAS_ISA_AVX512, 0, NULL));
}

static void test_only_cores_the_library_has(void **state)
{
    (void)state;
    const char *const no_avx512[] = { "Prescott", "Haswell", "Sandybridge", NULL };
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX512, 0, no_avx512), "Haswell");
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX512, 1, no_avx512), "Haswell");
    assert_null(pick("Haswell", FT_BLAS_ISA_AVX512, 0, no_avx512));
    const char *const old[] = { "Prescott", "Sandybridge", NULL };
    assert_string_equal(pick("Prescott", FT_BLAS_ISA_AVX512, 0, old), "Sandybridge");
    const char *const none[] = { NULL };
    assert_null(pick("Prescott", FT_BLAS_ISA_AVX512, 0, none));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_fallbacks_are_corrected),
        cmocka_unit_test(test_right_choices_are_kept),
        cmocka_unit_test(test_only_cores_the_library_has),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
