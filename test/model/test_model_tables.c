/* The model's tables: the family table (family.h) and the field table
 * (model_fields.h). Each family is found again by its name and its architecture and
 * named in ft_family_names(); each field row reads and writes its own member of
 * ft_model_config and no other, under a name no other row has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/model_fields.h"

static void test_families_by_name_and_listed(void **state)
{
    (void)state;
    char listed[256] = "";
    for (int i = 0; i < FT_FAMILY_COUNT; i++) {
        const ft_family_info *f = ft_family_info_of((ft_model_family)i);
        assert_non_null(f);
        assert_int_equal(f->family, i);
        assert_ptr_equal(ft_family_by_name(f->name), f);
        assert_ptr_equal(ft_family_by_architecture(f->architecture), f);
        size_t len = strlen(listed);
        snprintf(listed + len, sizeof listed - len, "%s%s", i ? ", " : "", f->name);
    }
    assert_string_equal(ft_family_names(), listed);
    assert_null(ft_family_info_of(FT_FAMILY_COUNT));
    assert_null(ft_family_by_name("llama2"));
    /* the stored enum values never move (run configs hold them) */
    assert_int_equal(FT_FAMILY_LLAMA, 0);
    assert_int_equal(FT_FAMILY_GPTJ, 5);
    assert_string_equal(ft_family_info_of(FT_FAMILY_QWEN2)->name, "qwen2");
    assert_true(ft_family_info_of(FT_FAMILY_QWEN2)->qkv_bias);
}

static void test_fields_touch_only_their_member(void **state)
{
    (void)state;
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    assert_true(n >= 19);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            assert_true(strcmp(fields[i].attr, fields[j].attr) != 0);
            assert_true(fields[i].offset != fields[j].offset);
        }
        ft_model_config zero, c;
        memset(&zero, 0, sizeof zero);
        memset(&c, 0, sizeof c);
        double v = fields[i].type == FT_FIELD_BOOL ? 1.0
                   : fields[i].type == FT_FIELD_FAMILY ? FT_FAMILY_GPTJ
                   : fields[i].type == FT_FIELD_DOUBLE ? 0.25 : 12345.0;
        ft_model_field_set(&c, &fields[i], v);
        assert_true(ft_model_field_get(&c, &fields[i]) == v);
        for (size_t j = 0; j < n; j++)
            if (j != i)
                assert_true(ft_model_field_get(&c, &fields[j]) == 0.0);
        assert_true(memcmp(&c, &zero, sizeof c) != 0);
    }
}

static void test_known_rows(void **state)
{
    (void)state;
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    ft_model_config c;
    memset(&c, 0, sizeof c);
    c.parallel_residual = true;
    c.rope_theta = 5e5;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(fields[i].attr, "parallel_residual") == 0)
            assert_true(ft_model_field_get(&c, &fields[i]) == 1.0 && fields[i].shape &&
                        fields[i].omit_when_absent && !fields[i].required);
        if (strcmp(fields[i].attr, "rope_theta") == 0)
            assert_true(ft_model_field_get(&c, &fields[i]) == 5e5 && fields[i].required);
        if (strcmp(fields[i].attr, "bos_token_id") == 0)
            assert_true(fields[i].absent == -1.0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families_by_name_and_listed),
        cmocka_unit_test(test_fields_touch_only_their_member),
        cmocka_unit_test(test_known_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
