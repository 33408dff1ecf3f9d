/* ft_run_config_lora (src/config/config_lora.c): the lora keys against the model's
 * family through ft_lora_resolve (src/model/lora.c). The expected sites per family are
 * written out here from lora.h's contract (gpt_neox: fused query_key_value, no gate;
 * gptj: no gate), apart from the code that derives them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config_lora.h"

#define SITE(s) (1u << FT_LORA_##s)

static const char *fixture(const char *name)
{
    static char buf[1024];
    const char *src = getenv("FT_SRCDIR");
    snprintf(buf, sizeof buf, "%s/test/config/%s", src ? src : ".", name);
    return buf;
}

/* Loads test/config/<name> with the overrides; fails the test on a load error. */
static void load(ft_run_config *c, const char *name, int n, char *const *ov)
{
    ft_error err;
    ft_error_clear(&err);
    if (ft_run_config_load(c, fixture(name), n, ov, &err) != 0)
        fail_msg("%s: %s", name, err.msg);
}

static ft_model_config of_family(const ft_run_config *c, ft_model_family f)
{
    ft_model_config m = c->model;
    m.family = f;
    return m;
}

static void test_off(void **state)
{
    (void)state;
    ft_run_config c;
    load(&c, "minimal.cfg", 0, NULL);
    ft_lora_config l;
    memset(&l, 0xff, sizeof l);
    ft_error err;
    assert_int_equal(ft_run_config_lora(&c, &c.model, &l, &err), 0);
    assert_false(ft_lora_enabled(&l));
    assert_int_equal(l.rank, 0);
    assert_int_equal(l.sites, 0);
    ft_run_config_free(&c);
}

/* lora.targets left out: every projection the family has. */
static void test_every_site_by_default(void **state)
{
    (void)state;
    static const struct {
        ft_model_family family;
        unsigned sites;
    } want[] = {
        {FT_FAMILY_LLAMA, SITE(Q) | SITE(K) | SITE(V) | SITE(O) | SITE(GATE) | SITE(UP) | SITE(DOWN)},
        {FT_FAMILY_QWEN2, SITE(Q) | SITE(K) | SITE(V) | SITE(O) | SITE(GATE) | SITE(UP) | SITE(DOWN)},
        {FT_FAMILY_QWEN3, SITE(Q) | SITE(K) | SITE(V) | SITE(O) | SITE(GATE) | SITE(UP) | SITE(DOWN)},
        {FT_FAMILY_MISTRAL, SITE(Q) | SITE(K) | SITE(V) | SITE(O) | SITE(GATE) | SITE(UP) | SITE(DOWN)},
        {FT_FAMILY_GPT_NEOX, SITE(QKV) | SITE(O) | SITE(UP) | SITE(DOWN)},
        {FT_FAMILY_GPTJ, SITE(Q) | SITE(K) | SITE(V) | SITE(O) | SITE(UP) | SITE(DOWN)},
    };
    char *ov[] = {"lora.rank=4", "lora.dropout=0.25"};
    ft_run_config c;
    load(&c, "minimal.cfg", 2, ov);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ft_model_config m = of_family(&c, want[i].family);
        ft_lora_config l;
        ft_error err;
        ft_error_clear(&err);
        if (ft_run_config_lora(&c, &m, &l, &err) != 0)
            fail_msg("family %d: %s", (int)want[i].family, err.msg);
        assert_int_equal(l.rank, 4);
        assert_true(l.alpha == 8.0);
        assert_true(l.dropout == 0.25);
        if (l.sites != want[i].sites)
            fail_msg("family %d: sites %#x, expected %#x", (int)want[i].family, l.sites,
                     want[i].sites);
        assert_true(ft_lora_scale(&l) == 2.0f);
    }
    ft_run_config_free(&c);
}

static void test_listed_targets(void **state)
{
    (void)state;
    ft_run_config c;
    load(&c, "lora.cfg", 0, NULL); /* rank 8, alpha 12, q_proj v_proj down_proj */
    ft_lora_config l;
    ft_error err;
    assert_int_equal(ft_run_config_lora(&c, &c.model, &l, &err), 0);
    assert_int_equal(l.sites, SITE(Q) | SITE(V) | SITE(DOWN));
    assert_true(ft_lora_scale(&l) == 1.5f);
    ft_run_config_free(&c);

    char *neox[] = {"lora.targets=[\"query_key_value\", \"dense_4h_to_h\"]"};
    load(&c, "lora.cfg", 1, neox);
    ft_model_config m = of_family(&c, FT_FAMILY_GPT_NEOX);
    assert_int_equal(ft_run_config_lora(&c, &m, &l, &err), 0);
    assert_int_equal(l.sites, SITE(QKV) | SITE(DOWN));
    ft_run_config_free(&c);
}

/* A name the family lacks: one line that starts where lora.targets came from. */
static void test_unknown_target(void **state)
{
    (void)state;
    ft_run_config c;
    ft_lora_config l;
    ft_error err;
    char *gate[] = {"lora.targets=[\"q_proj\", \"gate_proj\"]"};
    load(&c, "lora.cfg", 1, gate);
    ft_model_config m = of_family(&c, FT_FAMILY_GPTJ); /* GELU: no gate */
    ft_error_clear(&err);
    assert_int_equal(ft_run_config_lora(&c, &m, &l, &err), -1);
    const char *prefix = "command line: lora.targets=[\"q_proj\", \"gate_proj\"]: ";
    if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, "gate_proj") ||
        strchr(err.msg, '\n'))
        fail_msg("expected one line starting '%s' naming gate_proj: %s", prefix, err.msg);
    assert_true(err.flags & FT_ERR_CONFIG);
    ft_run_config_free(&c);

    /* from the file: its line */
    load(&c, "lora.cfg", 0, NULL);
    m = of_family(&c, FT_FAMILY_GPT_NEOX); /* q_proj, v_proj: fused in query_key_value */
    ft_error_clear(&err);
    assert_int_equal(ft_run_config_lora(&c, &m, &l, &err), -1);
    char want[1200];
    snprintf(want, sizeof want, "%s:20: lora.targets: ", fixture("lora.cfg"));
    if (strncmp(err.msg, want, strlen(want)) != 0 || !strstr(err.msg, "q_proj"))
        fail_msg("expected '%s...q_proj...': %s", want, err.msg);
    ft_run_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_every_site_by_default),
        cmocka_unit_test(test_listed_targets),
        cmocka_unit_test(test_unknown_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
