/* Unit tests of the pure parts of ftmpi-prep: packing plans, the train/eval split, UTF-8
 * validation and template rendering into pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prep/prep_pack.h"
#include "prep/prep_reader.h"
#include "prep/prep_template.h"

static void test_greedy_keeps_order_and_never_splits(void **state)
{
    (void)state;
    const int32_t len[] = { 5, 4, 3, 8, 1, 1 };
    prep_plan p;
    assert_int_equal(prep_pack(len, 6, 8, PREP_PACK_GREEDY, &p, NULL), 0);
    /* rows: [5] [4 3] [8] [1 1]: a document that does not fit opens the next row */
    const int64_t row[] = { 0, 1, 1, 2, 3, 3 };
    const int32_t off[] = { 0, 0, 4, 0, 0, 1 }, seg[] = { 0, 0, 1, 0, 0, 1 };
    assert_int_equal(p.rows, 4);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(p.row[k], row[k]);
        assert_int_equal(p.offset[k], off[k]);
        assert_int_equal(p.seg[k], seg[k]);
    }
    assert_int_equal(p.row_docs[1], 2);
    assert_int_equal(p.row_used[1], 7);
    prep_plan_free(&p);
}

static void test_ffd_first_fit_decreasing(void **state)
{
    (void)state;
    const int32_t len[] = { 2, 6, 3, 5, 2 };
    prep_plan p;
    assert_int_equal(prep_pack(len, 5, 8, PREP_PACK_FFD, &p, NULL), 0);
    /* sorted 6,5,3,2,2: 6->r0, 5->r1, 3->r1 (8), 2->r0 (8), 2->r2 */
    assert_int_equal(p.rows, 3);
    assert_int_equal(p.row[1], 0);
    assert_int_equal(p.row[3], 1);
    assert_int_equal(p.row[2], 1);
    assert_int_equal(p.offset[2], 5);
    assert_int_equal(p.row[0], 0);
    assert_int_equal(p.offset[0], 6);
    assert_int_equal(p.seg[0], 1);
    assert_int_equal(p.row[4], 2);
    for (int64_t r = 0; r < p.rows; r++)
        assert_true(p.row_used[r] <= 8);
    prep_plan_free(&p);
}

static void test_none_and_bad_length(void **state)
{
    (void)state;
    const int32_t len[] = { 1, 2, 3 };
    prep_plan p;
    assert_int_equal(prep_pack(len, 3, 8, PREP_PACK_NONE, &p, NULL), 0);
    assert_int_equal(p.rows, 3);
    prep_plan_free(&p);
    const int32_t too_long[] = { 9 };
    assert_int_equal(prep_pack(too_long, 1, 8, PREP_PACK_GREEDY, &p, NULL), -1);
}

static void test_split_deterministic(void **state)
{
    (void)state;
    int64_t *tr, *ev, *tr2, *ev2, ntr, nev, ntr2, nev2;
    assert_int_equal(prep_split(100, 0.1, 7, true, &tr, &ntr, &ev, &nev, NULL), 0);
    assert_int_equal(prep_split(100, 0.1, 7, true, &tr2, &ntr2, &ev2, &nev2, NULL), 0);
    assert_int_equal(nev, 10);
    assert_int_equal(ntr, 90);
    assert_memory_equal(tr, tr2, 90 * sizeof *tr);
    assert_memory_equal(ev, ev2, 10 * sizeof *ev);
    char seen[100] = { 0 };
    for (int i = 0; i < 90; i++)
        seen[tr[i]]++;
    for (int i = 0; i < 10; i++) {
        seen[ev[i]]++;
        if (i)
            assert_true(ev[i] > ev[i - 1]); /* eval in input order */
    }
    for (int i = 0; i < 100; i++)
        assert_int_equal(seen[i], 1);
    free(tr), free(ev), free(tr2), free(ev2);
    assert_int_equal(prep_split(5, 0.0, 1, false, &tr, &ntr, &ev, &nev, NULL), 0);
    assert_int_equal(nev, 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tr[i], i);
    free(tr), free(ev);
}

static void test_utf8(void **state)
{
    (void)state;
    assert_int_equal(prep_utf8_invalid_at("abc", 3), -1);
    assert_int_equal(prep_utf8_invalid_at("\xc3\xa9\xf0\x9f\xa6\x99", 6), -1);
    assert_int_equal(prep_utf8_invalid_at("a\xff", 2), 1);
    assert_int_equal(prep_utf8_invalid_at("\xc0\xaf", 2), 0);     /* overlong */
    assert_int_equal(prep_utf8_invalid_at("\xed\xa0\x80", 3), 0); /* surrogate */
    assert_int_equal(prep_utf8_invalid_at("ab\xe2\x82", 4), 2);   /* truncated */
}

static void test_render_alpaca_pieces(void **state)
{
    (void)state;
    ft_tokenizer *tok;
    /* the real tokenizers are unpacked into the build tree (test/data/Makefile.inc) */
    assert_int_equal(ft_tokenizer_load(FT_TEST_BUILDDIR "/test/data/tokenizers/llama3/tokenizer.json",
                                       &tok, NULL), 0);
    prep_template t;
    assert_int_equal(prep_template_init(&t, PREP_FORMAT_ALPACA, PREP_TPL_AUTO, NULL, NULL, tok,
                                        NULL, NULL), 0);
    assert_int_equal(t.bos, 128000);
    assert_int_equal(t.eos, 128001);
    json_t *obj = json_pack("{s:s, s:s, s:s}", "instruction", "Hi <|eot_id|>", "input", "",
                            "output", "Yo");
    prep_render r = { 0 };
    assert_int_equal(prep_render_json(&t, obj, &r, NULL), 0);
    assert_int_equal(r.n, 4); /* BOS, prompt, output, EOS */
    assert_int_equal(r.pieces[0].special, 128000);
    assert_false(r.pieces[1].target);
    assert_true(strstr(r.text + r.pieces[1].off, "Hi <|eot_id|>") != NULL); /* user text stays text */
    assert_true(r.pieces[2].target);
    assert_int_equal(r.pieces[3].special, 128001);
    json_decref(obj);
    prep_render_free(&r);
    prep_template_free(&t);
    ft_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_keeps_order_and_never_splits),
        cmocka_unit_test(test_ffd_first_fit_decreasing),
        cmocka_unit_test(test_none_and_bad_length),
        cmocka_unit_test(test_split_deterministic),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_render_alpaca_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
