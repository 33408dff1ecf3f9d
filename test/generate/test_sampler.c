/* The sampler: greedy and top-k = 1 are the argmax (ties to the lowest id); draws are
 * a pure function of (seed, stream, step); top-k and top-p draw only inside their set
 * and with the renormalised probabilities (frequencies over 40000 draws within 0.01);
 * temperature rescales the logits; -inf and NaN are never drawn; bad settings are
 * refused with the option named. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "generate/sampler.h"
#include "util/rng.h"

#define DRAWS 40000
#define FREQ_TOL 0.01

static ft_sampler *make(double t, int k, double p, uint64_t seed, int V)
{
    ft_sampler_config c = { .temperature = t, .top_k = k, .top_p = p, .seed = seed };
    ft_sampler *s;
    ft_error err;
    assert_int_equal(ft_sampler_create(&s, &c, V, &err), 0);
    return s;
}

static void random_logits(float *l, int V, uint64_t seed)
{
    for (int i = 0; i < V; i++)
        l[i] = (float)(4.0 * ft_rng_normal(seed, 1, (uint64_t)i));
}

static void test_greedy_and_top1(void **state)
{
    enum { V = 1000 };
    float l[V];
    ft_sampler *greedy = make(0.0, 0, 1.0, 1, V), *top1 = make(0.8, 1, 0.9, 1, V);
    for (uint64_t trial = 0; trial < 50; trial++) {
        random_logits(l, V, trial);
        int32_t a = ft_argmax(l, V);
        assert_int_equal(ft_sampler_pick(greedy, l, trial, 0), a);
        assert_int_equal(ft_sampler_pick(top1, l, trial, trial), a);
    }
    /* ties: the lowest id; NaN is never the argmax */
    float t[5] = { 1.0f, 3.0f, NAN, 3.0f, -INFINITY };
    assert_int_equal(ft_argmax(t, 5), 1);
    ft_sampler *top1_small = make(0.8, 1, 1.0, 1, 5);
    assert_int_equal(ft_sampler_pick(top1_small, t, 0, 0), 1);
    ft_sampler_free(top1_small);
    float n[3] = { NAN, -1.0f, -2.0f };
    assert_int_equal(ft_argmax(n, 3), 1);
    ft_sampler_free(greedy);
    ft_sampler_free(top1);
}

static void test_reproducible(void **state)
{
    enum { V = 300, STEPS = 200 };
    float l[V];
    random_logits(l, V, 9);
    for (int i = 0; i < V; i++)
        l[i] *= 0.25f; /* flat enough that draws vary */
    ft_sampler *a = make(1.0, 50, 0.95, 42, V), *b = make(1.0, 50, 0.95, 42, V);
    ft_sampler *c = make(1.0, 50, 0.95, 43, V);
    int same_seed = 0, other_seed = 0, other_stream = 0;
    for (int step = STEPS - 1; step >= 0; step--) { /* order does not matter */
        int32_t x = ft_sampler_pick(a, l, 0, (uint64_t)step);
        same_seed += x == ft_sampler_pick(b, l, 0, (uint64_t)step);
        other_seed += x == ft_sampler_pick(c, l, 0, (uint64_t)step);
        other_stream += x == ft_sampler_pick(b, l, 1, (uint64_t)step);
    }
    assert_int_equal(same_seed, STEPS);
    assert_true(other_seed < STEPS / 2);
    assert_true(other_stream < STEPS / 2);
    ft_sampler_free(a);
    ft_sampler_free(b);
    ft_sampler_free(c);
}

/* Frequencies of DRAWS draws against expected probabilities want[V]. */
static void check_freq(ft_sampler *s, const float *l, int V, const double *want)
{
    int *count = calloc((size_t)V, sizeof *count);
    for (int i = 0; i < DRAWS; i++) {
        int32_t x = ft_sampler_pick(s, l, 7, (uint64_t)i);
        assert_true(x >= 0 && x < V);
        count[x]++;
    }
    for (int i = 0; i < V; i++) {
        double f = (double)count[i] / DRAWS;
        if (want[i] == 0.0 && count[i] != 0) {
            fprintf(stderr, "id %d drawn %d times but is outside the set\n", i, count[i]);
            fail();
        }
        if (fabs(f - want[i]) > FREQ_TOL) {
            fprintf(stderr, "id %d: frequency %.4f, probability %.4f\n", i, f, want[i]);
            fail();
        }
    }
    free(count);
}

/* softmax(l / t) restricted to ids with keep[i], renormalised. */
static void expected(const float *l, int V, double t, const int *keep, double *p)
{
    double z = 0.0;
    for (int i = 0; i < V; i++)
        z += p[i] = keep[i] && isfinite(l[i]) ? exp(l[i] / t) : 0.0;
    for (int i = 0; i < V; i++)
        p[i] /= z;
}

static void test_distributions(void **state)
{
    enum { V = 6 };
    /* probabilities at T = 1: ~0.49, 0.26, 0.13, 0.07, 0.04, 0 */
    const float l[V] = { 2.0f, 1.37f, 0.68f, 0.05f, -0.5f, -INFINITY };
    double p[V];
    const int all[V] = { 1, 1, 1, 1, 1, 1 };
    const int top3[V] = { 1, 1, 1, 0, 0, 0 };
    const int top2[V] = { 1, 1, 0, 0, 0, 0 };

    ft_sampler *s = make(1.0, 0, 1.0, 3, V);
    expected(l, V, 1.0, all, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);

    s = make(2.0, 0, 1.0, 3, V); /* temperature */
    expected(l, V, 2.0, all, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);

    s = make(1.0, 3, 1.0, 3, V); /* top-k */
    expected(l, V, 1.0, top3, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);

    /* top-p: 0.49 + 0.26 = 0.75 >= 0.7 -> two tokens; 0.8 needs the third */
    s = make(1.0, 0, 0.7, 3, V);
    expected(l, V, 1.0, top2, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);
    s = make(1.0, 0, 0.8, 3, V);
    expected(l, V, 1.0, top3, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);

    /* top-k then top-p on the renormalised top-k set: within {0,1,2} the first
     * two hold 0.85 of the mass, so p = 0.8 keeps two */
    s = make(1.0, 3, 0.8, 3, V);
    expected(l, V, 1.0, top2, p);
    check_freq(s, l, V, p);
    ft_sampler_free(s);
}

/* Quickselect of the top k against a full sort on a large shuffled vocabulary. */
static void test_top_k_large(void **state)
{
    enum { V = 5000 };
    float *l = malloc(V * sizeof *l);
    for (int i = 0; i < V; i++)
        l[i] = (float)(i % 997) * 0.01f; /* many ties */
    for (int k = 1; k <= 64; k *= 4) {
        ft_sampler *s = make(0.5, k, 1.0, 5, V);
        for (int d = 0; d < 300; d++) {
            int32_t x = ft_sampler_pick(s, l, 0, (uint64_t)d);
            /* rank of x: ids with a larger logit, or equal and lower id */
            int rank = 0;
            for (int i = 0; i < V; i++)
                rank += l[i] > l[x] || (l[i] == l[x] && i < x);
            assert_true(rank < k);
        }
        ft_sampler_free(s);
    }
    free(l);
}

static void test_bad_config(void **state)
{
    ft_error err;
    ft_sampler_config c = { .temperature = -0.5, .top_p = 1.0 };
    assert_int_not_equal(ft_sampler_config_check(&c, &err), 0);
    assert_non_null(strstr(err.msg, "--temperature"));
    c = (ft_sampler_config){ .temperature = NAN, .top_p = 1.0 };
    assert_int_not_equal(ft_sampler_config_check(&c, &err), 0);
    c = (ft_sampler_config){ .temperature = 1.0, .top_k = -1, .top_p = 1.0 };
    assert_int_not_equal(ft_sampler_config_check(&c, &err), 0);
    assert_non_null(strstr(err.msg, "--top-k"));
    c = (ft_sampler_config){ .temperature = 1.0, .top_p = 0.0 };
    assert_int_not_equal(ft_sampler_config_check(&c, &err), 0);
    assert_non_null(strstr(err.msg, "--top-p"));
    c = (ft_sampler_config){ .temperature = 1.0, .top_p = 1.5 };
    assert_int_not_equal(ft_sampler_config_check(&c, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_and_top1),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_distributions),
        cmocka_unit_test(test_top_k_large),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
