/* fp32 <-> bf16 casts: round to nearest even (ties both ways), NaN stays NaN
 * (also NaNs whose payload lies only in the dropped bits), +-inf, +-0,
 * denormals, overflow to inf, and exact round trips of all 65536 bf16 values;
 * plus the vectorisable exp of cpu_math.h against libm in double. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/cpu_math.h"
#include "backend_test_util.h"

static uint16_t to_bf16(ft_backend *be, uint32_t bits)
{
    float x = ft_cpu_f32_from_bits(bits);
    float *d = bt_upload(be, &x, 1);
    uint16_t *o = be->ops->alloc(be, 2), out;
    be->ops->f32_to_bf16(be, o, d, 1);
    be->ops->download(be, &out, o, 2);
    be->ops->free(be, d), be->ops->free(be, o);
    return out;
}

static void test_f32_to_bf16_rounding(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {0x3F800000u, 0x3F80, "1.0 exact"},
        {0x3F808000u, 0x3F80, "tie, even below: down"},
        {0x3F818000u, 0x3F82, "tie, odd below: up"},
        {0x3F808001u, 0x3F81, "just above the tie: up"},
        {0x3F807FFFu, 0x3F80, "just below the tie: down"},
        {0xBF818000u, 0xBF82, "negative tie to even"},
        {0x3FFF8000u, 0x4000, "tie carries into the exponent"},
        {0x7F7FFFFFu, 0x7F80, "FLT_MAX rounds to inf"},
        {0x7F7F7FFFu, 0x7F7F, "largest that stays finite"},
        {0x7F800000u, 0x7F80, "+inf"},
        {0xFF800000u, 0xFF80, "-inf"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "smallest denormal rounds to 0"},
        {0x00008000u, 0x0000, "denormal tie, even: down"},
        {0x00018000u, 0x0002, "denormal tie, odd: up"},
        {0x00400000u, 0x0040, "denormal exact"},
        {0x007FFFFFu, 0x0080, "largest denormal rounds up to FLT_MIN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint16_t got = to_bf16(be, cases[i].in);
        if (got != cases[i].out)
            fail_msg("%s: 0x%08X -> 0x%04X, want 0x%04X", cases[i].what, cases[i].in, got,
                     cases[i].out);
    }
    /* NaNs: must stay NaN with their sign, including payloads below bit 16 and
     * payloads that would round up into the exponent. */
    const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7F80FFFFu, 0x7FFFFFFFu, 0xFF800001u};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        uint16_t got = to_bf16(be, nans[i]);
        assert_true((got & 0x7F80) == 0x7F80 && (got & 0x007F) != 0);
        assert_int_equal(got & 0x8000, (nans[i] >> 16) & 0x8000);
    }
    ft_backend_destroy(be);
}

/* Every bf16 widens exactly and narrows back to itself (NaNs: to a NaN). */
static void test_bf16_round_trip_all(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    const size_t n = 65536;
    uint16_t *h = malloc(n * 2), *back = malloc(n * 2);
    float *f = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    uint16_t *dh = be->ops->alloc(be, n * 2), *db = be->ops->alloc(be, n * 2);
    float *df = be->ops->alloc(be, n * 4);
    be->ops->upload(be, dh, h, n * 2);
    be->ops->bf16_to_f32(be, df, dh, n);
    be->ops->f32_to_bf16(be, db, df, n);
    be->ops->download(be, f, df, n * 4);
    be->ops->download(be, back, db, n * 2);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ft_cpu_f32_bits(f[i]), (uint32_t)i << 16);
        bool nan = (i & 0x7F80) == 0x7F80 && (i & 0x7F);
        if (nan)
            assert_true(isnan(ft_cpu_f32_from_bits((uint32_t)back[i] << 16)));
        else
            assert_int_equal(back[i], i);
    }
    be->ops->free(be, dh), be->ops->free(be, db), be->ops->free(be, df);
    free(h), free(back), free(f);
    ft_backend_destroy(be);
}

/* ft_cpu_expf: within 3 ulp (4e-7 relative) of exp over the normal range,
 * exactly 0 below it and for -inf, +inf past FLT_MAX, NaN for NaN. */
static void test_fast_exp(void **state)
{
    (void)state;
    double worst = 0.0;
    for (double x = -87.0; x <= 88.72; x += 0.0007) {
        float xf = (float)x;
        double want = exp((double)xf);
        double rel = fabs(ft_cpu_expf(xf) - want) / want;
        worst = rel > worst ? rel : worst;
    }
    assert_true(worst < 4e-7);
    assert_true(ft_cpu_expf(0.0f) == 1.0f);
    assert_true(ft_cpu_expf(-INFINITY) == 0.0f);
    assert_true(ft_cpu_expf(-100.0f) == 0.0f);
    assert_true(ft_cpu_expf(88.7f) > 3.3e38f && isfinite(ft_cpu_expf(88.7f)));
    assert_true(isinf(ft_cpu_expf(89.0f)) && isinf(ft_cpu_expf(INFINITY)));
    assert_true(isnan(ft_cpu_expf(NAN)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_to_bf16_rounding),
        cmocka_unit_test(test_bf16_round_trip_all),
        cmocka_unit_test(test_fast_exp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
