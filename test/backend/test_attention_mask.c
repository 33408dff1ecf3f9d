/* The attention mask rule (backend/attention_mask.h): every tile predicate and bound
 * is checked against the pairwise rule over all small geometries, so a tile the
 * kernels skip can hold no visible pair and a tile they take unmasked holds no
 * hidden one; the FLOP count's pair total is checked against a plain count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/attention_mask.h"

/* Straight from the definition: causal and j > i - W. */
static bool sees_by_definition(int i, int j, int window)
{
    return j <= i && (window == 0 || i - j < window);
}

static void test_pair_rule_and_first_key(void **state)
{
    (void)state;
    for (int window = 0; window <= 9; window++)
        for (int i = 0; i < 40; i++) {
            int first = -1;
            for (int j = 0; j < 40; j++) {
                assert_int_equal(ft_mask_sees(i, j, window), sees_by_definition(i, j, window));
                if (first < 0 && sees_by_definition(i, j, window))
                    first = j;
            }
            assert_int_equal(ft_mask_first_key(i, window), first);
        }
}

/* For every query tile x key tile of a row: before_window iff no pair of the key tile is
 * seen by any query at or after q0; all_seen iff every pair is seen; the key-tile range
 * [first, end) holds every tile with a seen pair and starts and ends on one. */
static void test_tile_rules(void **state)
{
    (void)state;
    const int seq = 37;
    for (int bk = 1; bk <= 8; bk++)
        for (int window = 0; window <= 12; window++)
            for (int q0 = 0; q0 < seq; q0 += bk) {
                int qn = q0 + bk <= seq ? bk : seq - q0;
                int first = ft_mask_first_key_tile(q0, window, bk);
                int end = ft_mask_end_key_tile(q0, qn, bk);
                for (int k0 = 0; k0 < seq; k0 += bk) {
                    int kn = k0 + bk <= seq ? bk : seq - k0;
                    bool any_later = false, any = false, all = true;
                    for (int i = q0; i < seq; i++)
                        for (int j = k0; j < k0 + kn; j++) {
                            bool v = sees_by_definition(i, j, window);
                            any_later |= v;
                            if (i < q0 + qn) {
                                any |= v;
                                all &= v;
                            }
                        }
                    assert_int_equal(ft_mask_tile_before_window(q0, k0, kn, window), !any_later);
                    assert_int_equal(ft_mask_tile_all_seen(q0, qn, k0, kn, window), all);
                    /* the range holds every tile with a seen pair, and is tight */
                    int kt = k0 / bk;
                    if (any || kt == first || kt == end - 1)
                        assert_true(any && kt >= first && kt < end);
                }
            }
}

static void test_visible_pairs(void **state)
{
    (void)state;
    for (int seq = 1; seq <= 50; seq += 7)
        for (int window = 0; window <= 11; window += 3)
            for (int doc = 0; doc <= 13; doc += 4) {
                double n = 0;
                for (int i = 0; i < seq; i++)
                    for (int j = 0; j < seq; j++)
                        n += sees_by_definition(i, j, window) &&
                             (doc == 0 || i / doc == j / doc);
                assert_true(ft_mask_visible_pairs(seq, window, doc) == n);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pair_rule_and_first_key),
        cmocka_unit_test(test_tile_rules),
        cmocka_unit_test(test_visible_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
