/* io/peft_adapter without PEFT (test_peft.sh checks against PEFT itself when it is
 * installed):
 *  - write -> read gives every adapter tensor back exactly (fp32) and, through
 *    ft_peft_adapter_read_range, every unit slice; read -> write gives the same bytes;
 *  - the keys are "base_model.model." + HF module path + ".lora_{A,B}.weight";
 *  - GPT-NeoX's fused B is stored head by head: HF row (3 h + p) head_dim + d is ftmpi
 *    row p heads head_dim + h head_dim + d (p = 0, 1, 2 for q, k, v), read straight
 *    from the file;
 *  - bf16 output rounds to nearest even and reads back as the rounded values;
 *  - a config that is not plain LoRA is refused naming the key;
 *  - the run's lora settings are checked against the directory's, and the adapters
 *    written as a weights file (the trainer's seeding path) read back as themselves. */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "io/peft_adapter.h"
#include "io/weights.h"
#include "util/bf16.h"

/* A distinct value per (tensor name, element). */
static float value_of(const char *name, size_t i)
{
    uint32_t h = 2166136261u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h ^= (uint32_t)i * 2654435761u;
    h = (h ^ (h >> 15)) * 2246822519u;
    return (float)(h >> 8) / 16777216.0f - 0.5f;
}

static int synthetic(void *ctx, const ft_tensor_info *t, float *dst, ft_error *err)
{
    (void)ctx;
    (void)err;
    for (size_t i = 0; i < t->numel; i++)
        dst[i] = value_of(t->name, i);
    return 0;
}

static int from_reader(void *ctx, const ft_tensor_info *t, float *dst, ft_error *err)
{
    return ft_peft_adapter_read_tensor(ctx, t, dst, err);
}

static char scratch[256];

static int make_scratch(void **state)
{
    (void)state;
    snprintf(scratch, sizeof scratch, "%s/peft-adapter-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(scratch) ? 0 : -1;
}

static int remove_scratch(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    return system(cmd) == 0 ? 0 : -1;
}

static void dir_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", scratch, name);
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        fail_msg("mkdir %s", buf);
}

static ft_model_config neox_config(void)
{
    ft_model_config c = test_tiny_config();
    c.family = FT_FAMILY_GPT_NEOX;
    c.num_key_value_heads = c.num_attention_heads;
    return c;
}

static void round_trip(ft_model_config c, char **targets, const char *name)
{
    ft_error err;
    ft_lora_config lora;
    ft_model_layout l;
    assert_int_equal(ft_lora_resolve(&c, 3, 6.0, 0.05, targets, &lora, &err), 0);
    assert_int_equal(ft_lora_layout_build(&l, &c, &lora, &err), 0);
    char d1[300], d2[300], n1[400], n2[400];
    snprintf(n1, sizeof n1, "%s_1", name);
    snprintf(n2, sizeof n2, "%s_2", name);
    dir_path(d1, sizeof d1, n1);
    dir_path(d2, sizeof d2, n2);
    assert_int_equal(ft_peft_adapter_write(d1, &l, &lora, "org/base", FT_ST_F32, synthetic, NULL,
                                           &err), 0);
    ft_peft_adapter a;
    if (ft_peft_adapter_open(&a, d1, &c, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(a.lora.rank, 3);
    assert_true(a.lora.alpha == 6.0 && a.lora.sites == lora.sites);
    assert_string_equal(a.base_model, "org/base");
    for (int i = 0; i < l.total_tensors; i++) {
        const ft_tensor_info *t = ft_model_layout_tensor_at(&l, i);
        float *got = malloc(t->numel * sizeof *got);
        assert_int_equal(ft_peft_adapter_read_tensor(&a, t, got, &err), 0);
        for (size_t k = 0; k < t->numel; k++)
            assert_true(got[k] == value_of(t->name, k));
        free(got);
    }
    for (int u = 0; u < l.n_units; u++) { /* a slice that cuts tensors */
        const ft_unit_layout *ul = &l.units[u];
        const size_t b = ul->numel / 3, e = ul->numel - 7;
        float *got = malloc((e - b) * sizeof *got);
        assert_int_equal(ft_peft_adapter_read_range(&a, ul, b, e, got, &err), 0);
        for (int t = 0; t < ul->n_tensors; t++)
            for (size_t k = 0; k < ul->tensors[t].numel; k++) {
                const size_t at = ul->tensors[t].offset + k;
                if (at >= b && at < e)
                    assert_true(got[at - b] == value_of(ul->tensors[t].name, k));
            }
        free(got);
    }
    assert_int_equal(ft_peft_adapter_write(d2, &a.layout, &a.lora, a.base_model, FT_ST_F32,
                                           from_reader, &a, &err), 0);
    ft_peft_adapter_close(&a);
    char f1[500], f2[500];
    snprintf(f1, sizeof f1, "%s/" FT_PEFT_WEIGHTS_NAME, d1);
    snprintf(f2, sizeof f2, "%s/" FT_PEFT_WEIGHTS_NAME, d2);
    char *b1 = NULL, *b2 = NULL;
    size_t s1 = 0, s2 = 0;
    FILE *p1 = fopen(f1, "rb"), *p2 = fopen(f2, "rb");
    assert_non_null(p1);
    assert_non_null(p2);
    fseek(p1, 0, SEEK_END);
    fseek(p2, 0, SEEK_END);
    s1 = (size_t)ftell(p1);
    s2 = (size_t)ftell(p2);
    assert_int_equal(s1, s2);
    rewind(p1);
    rewind(p2);
    b1 = malloc(s1);
    b2 = malloc(s2);
    assert_int_equal(fread(b1, 1, s1, p1), s1);
    assert_int_equal(fread(b2, 1, s2, p2), s2);
    assert_memory_equal(b1, b2, s1);
    fclose(p1);
    fclose(p2);
    free(b1);
    free(b2);
    ft_model_layout_free(&l);
}

static void llama_round_trip(void **state)
{
    (void)state;
    char *t[] = { "q_proj", "v_proj", "o_proj", "down_proj", NULL };
    round_trip(test_tiny_config(), t, "llama");
}

static void neox_round_trip(void **state)
{
    (void)state;
    char *t[] = { "query_key_value", "dense_4h_to_h", NULL };
    round_trip(neox_config(), t, "neox");
}

/* The fused B as stored, element by element, and the key names. */
static void neox_rows_head_by_head(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = neox_config();
    char *t[] = { "query_key_value", NULL };
    ft_lora_config lora;
    ft_model_layout l;
    assert_int_equal(ft_lora_resolve(&c, 2, 4.0, 0.0, t, &lora, &err), 0);
    assert_int_equal(ft_lora_layout_build(&l, &c, &lora, &err), 0);
    char d[300], f[400];
    dir_path(d, sizeof d, "neox_rows");
    assert_int_equal(ft_peft_adapter_write(d, &l, &lora, "", FT_ST_F32, synthetic, NULL, &err), 0);
    snprintf(f, sizeof f, "%s/" FT_PEFT_WEIGHTS_NAME, d);
    ft_st_file st;
    assert_int_equal(ft_st_open(&st, f, 0, &err), 0);
    assert_non_null(ft_st_find(&st, "base_model.model.gpt_neox.layers.1.attention.query_key_value"
                                    ".lora_A.weight"));
    const ft_st_tensor *b =
        ft_st_find(&st, "base_model.model.gpt_neox.layers.1.attention.query_key_value.lora_B.weight");
    assert_non_null(b);
    const int H = c.num_attention_heads, hd = c.head_dim, r = 2;
    float *hf = malloc(ft_st_tensor_bytes(b));
    assert_int_equal(ft_st_read(&st, b, 0, hf, ft_st_tensor_bytes(b), &err), 0);
    for (int h = 0; h < H; h++)
        for (int p = 0; p < 3; p++)
            for (int e = 0; e < hd; e++)
                for (int k = 0; k < r; k++) {
                    const size_t hf_row = (size_t)(3 * h + p) * hd + e;
                    const size_t our_row = (size_t)p * H * hd + (size_t)h * hd + e;
                    assert_true(hf[hf_row * r + k] ==
                                value_of("model.layers.1.self_attn.qkv_proj.lora_B.weight",
                                         our_row * r + k));
                }
    free(hf);
    ft_st_close(&st);
    ft_model_layout_free(&l);
}

static void bf16_rounds(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = test_tiny_config();
    char *t[] = { "up_proj", NULL };
    ft_lora_config lora;
    ft_model_layout l;
    assert_int_equal(ft_lora_resolve(&c, 2, 4.0, 0.0, t, &lora, &err), 0);
    assert_int_equal(ft_lora_layout_build(&l, &c, &lora, &err), 0);
    char d[300];
    dir_path(d, sizeof d, "bf16");
    assert_int_equal(ft_peft_adapter_write(d, &l, &lora, "", FT_ST_BF16, synthetic, NULL, &err), 0);
    ft_peft_adapter a;
    assert_int_equal(ft_peft_adapter_open(&a, d, &c, &err), 0);
    const ft_tensor_info *ti = ft_model_layout_tensor_at(&l, 1);
    float *got = malloc(ti->numel * sizeof *got);
    assert_int_equal(ft_peft_adapter_read_tensor(&a, ti, got, &err), 0);
    for (size_t k = 0; k < ti->numel; k++)
        assert_true(got[k] == ft_bf16_to_f32(ft_f32_to_bf16(value_of(ti->name, k))));
    free(got);
    ft_peft_adapter_close(&a);
    ft_model_layout_free(&l);
}

static void refuses_dora(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = test_tiny_config();
    char d[300], f[400];
    dir_path(d, sizeof d, "dora");
    snprintf(f, sizeof f, "%s/" FT_PEFT_CONFIG_NAME, d);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fputs("{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 4, \"use_dora\": true,"
          " \"target_modules\": [\"q_proj\"]}", fp);
    fclose(fp);
    ft_peft_adapter a;
    assert_int_not_equal(ft_peft_adapter_open(&a, d, &c, &err), 0);
    assert_non_null(strstr(err.msg, "adapter_config.json: \"use_dora\" is set"));
}

static void config_check_and_weights_file(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = neox_config();
    char *t[] = { "query_key_value", "dense", NULL }, *other[] = { "dense", NULL };
    ft_lora_config lora, lora2;
    ft_model_layout l;
    assert_int_equal(ft_lora_resolve(&c, 2, 4.0, 0.0, t, &lora, &err), 0);
    assert_int_equal(ft_lora_layout_build(&l, &c, &lora, &err), 0);
    char d[300], h5[400];
    dir_path(d, sizeof d, "to_h5");
    assert_int_equal(ft_peft_adapter_write(d, &l, &lora, "", FT_ST_F32, synthetic, NULL, &err), 0);
    ft_peft_adapter a;
    assert_int_equal(ft_peft_adapter_open(&a, d, &c, &err), 0);
    assert_int_equal(ft_peft_adapter_check_config(&a, &lora, &err), 0);
    assert_int_equal(ft_lora_resolve(&c, 2, 4.0, 0.0, other, &lora2, &err), 0);
    assert_int_not_equal(ft_peft_adapter_check_config(&a, &lora2, &err), 0);
    assert_non_null(strstr(err.msg, "target_modules dense,query_key_value; the run's lora group "
                                    "has rank 2, alpha 4, targets dense"));
    lora2 = lora;
    lora2.rank = 3;
    assert_int_not_equal(ft_peft_adapter_check_config(&a, &lora2, &err), 0);
    snprintf(h5, sizeof h5, "%s/adapters.h5", scratch);
    assert_int_equal(ft_peft_adapter_write_weights(&a, h5, &err), 0);
    ft_peft_adapter_close(&a);
    ft_h5file f;
    assert_int_equal(ft_h5_open(&f, h5, MPI_COMM_SELF, &err), 0);
    assert_int_equal(ft_h5_check_kind(&f, "weights", &err), 0);
    assert_int_equal(ft_weights_check_tensors(&f, "/model", &l, &err), 0);
    for (int u = 0; u < l.n_units; u++) {
        const ft_unit_layout *ul = &l.units[u];
        float *got = malloc(ul->numel * sizeof *got);
        assert_int_equal(ft_weights_read_range(&f, "/model", ul, 0, ul->numel, got, &err), 0);
        for (int k = 0; k < ul->n_tensors; k++)
            for (size_t i = 0; i < ul->tensors[k].numel; i++)
                assert_true(got[ul->tensors[k].offset + i] == value_of(ul->tensors[k].name, i));
        free(got);
    }
    ft_h5_close(&f, &err);
    ft_model_layout_free(&l);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llama_round_trip),
        cmocka_unit_test(neox_round_trip),
        cmocka_unit_test(neox_rows_head_by_head),
        cmocka_unit_test(bf16_rounds),
        cmocka_unit_test(refuses_dora),
        cmocka_unit_test(config_check_and_weights_file),
    };
    int rc = cmocka_run_group_tests(tests, make_scratch, remove_scratch);
    MPI_Finalize();
    return rc;
}
