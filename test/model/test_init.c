/* Random initialisation stays bitwise what it was when it ran on one thread with libm
 * per element (checkpoints, resume and the other tests depend on those values):
 *  - ft_rng_normal_fill_f32 against (float)(std * ft_rng_normal(...)) element by
 *    element, for several std, seeds, streams and start indices;
 *  - ft_model_init_range on ranges that cut tensors and work chunks, with 3 threads,
 *    against the serial loop it replaced (kept here as the reference);
 *  - a stored hash of the tiny model's initial parameters, so that a change of the
 *    reference itself (ft_rng_normal, the name streams) is caught too. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "model/init.h"
#include "util/rng.h"
#include "util/rng_fill.h"

static void fill_matches_reference(void **state)
{
    (void)state;
    const size_t n = (size_t)1 << 20;
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    const double stds[] = { 0.02, 1.0, 0.001, 3.7 };
    const uint64_t firsts[] = { 0, 12345678901ull, (uint64_t)1 << 40 };
    for (size_t s = 0; s < sizeof stds / sizeof stds[0]; s++)
        for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
            const uint64_t seed = 7 + s, stream = 0x9e3779b97f4a7c15ull * (f + 1);
            ft_rng_normal_fill_f32(seed, stream, firsts[f], n, stds[s], got);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                const float want = (float)(stds[s] * ft_rng_normal(seed, stream, firsts[f] + i));
                if (memcmp(&want, &got[i], sizeof want) != 0 && bad++ < 3)
                    print_error("std %g first %llu i %zu: %.9g, want %.9g\n", stds[s],
                                (unsigned long long)firsts[f], i, got[i], want);
            }
            assert_int_equal(bad, 0);
        }
    free(got);
}

static uint64_t name_stream(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The serial initialisation as it was before it was parallelised (model/init.c). */
static void serial_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                              double std, float *dst)
{
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo = begin > ti->offset ? begin : ti->offset;
        size_t hi = end < ti->offset + ti->numel ? end : ti->offset + ti->numel;
        if (lo >= hi)
            continue;
        uint64_t stream = name_stream(ti->name);
        const size_t len = strlen(ti->name);
        const bool bias = len >= 5 && strcmp(ti->name + len - 5, ".bias") == 0;
        for (size_t i = lo; i < hi; i++)
            dst[i - begin] = ti->ndim == 2
                                 ? (float)(std * ft_rng_normal(seed, stream, i - ti->offset))
                                 : bias ? 0.0f : 1.0f;
    }
}

static void init_range_matches_serial(void **state)
{
    (void)state;
    /* qwen2: q/k/v biases and norms among the weights; 2-D tensors longer than a chunk */
    ft_model_config c = test_tiny_config();
    c.family = FT_FAMILY_QWEN2;
    c.hidden_size = 256;
    c.intermediate_size = 688;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.vocab_size = 1003;
    ft_model_layout l;
    ft_error err;
    TEST_CHECK_OK(ft_model_layout_build(&l, &c, &err), &err);
    omp_set_num_threads(3);
    for (int u = 0; u < l.n_units; u++) {
        const size_t n = l.units[u].numel;
        /* whole unit, and a range cutting tensors and chunks at odd places */
        const size_t ranges[2][2] = { { 0, n }, { n / 7 + 3, n - n / 5 - 1 } };
        for (int r = 0; r < 2; r++) {
            const size_t b = ranges[r][0], e = ranges[r][1];
            float *got = malloc((e - b) * sizeof *got), *want = malloc((e - b) * sizeof *want);
            assert_non_null(got);
            assert_non_null(want);
            ft_model_init_range(&l.units[u], b, e, 11, 0.02, got);
            serial_init_range(&l.units[u], b, e, 11, 0.02, want);
            assert_memory_equal(got, want, (e - b) * sizeof *got);
            free(got);
            free(want);
        }
    }
    ft_model_layout_free(&l);
}

static void tiny_model_hash_is_stable(void **state)
{
    (void)state;
    ft_model_config c = test_tiny_config();
    ft_model_layout l;
    ft_error err;
    TEST_CHECK_OK(ft_model_layout_build(&l, &c, &err), &err);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the float bits, unit by unit */
    for (int u = 0; u < l.n_units; u++) {
        const size_t n = l.units[u].numel;
        float *v = malloc(n * sizeof *v);
        assert_non_null(v);
        ft_model_init_range(&l.units[u], 0, n, 7, 0.02, v);
        const unsigned char *p = (const unsigned char *)v;
        for (size_t i = 0; i < n * sizeof *v; i++)
            h = (h ^ p[i]) * 1099511628211ull;
        free(v);
    }
    ft_model_layout_free(&l);
    /* the value of the serial libm loop at commit 185ce43 */
    assert_int_equal(h, 0xd8d5ff82f41a437bull);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fill_matches_reference),
        cmocka_unit_test(init_range_matches_serial),
        cmocka_unit_test(tiny_model_hash_is_stable),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
