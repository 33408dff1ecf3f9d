/* MFU's parts (train/mfu.h) against hand computations:
 *  - the matmul parameter count N of a small model, untied and tied;
 *  - the visible (query, key) pairs of rows with packed documents and a sliding window;
 *  - the step's model FLOPs for such a row;
 *  - the datasheet table by the names drivers report, and the choice of the peak. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "train/mfu.h"

/* test_tiny_config: vocab 37, hidden 32, ffn 48, 2 layers, 4 heads / 2 kv of 8 */
static long long hand_matmul_params(void)
{
    const long long q = 32 * 32, k = 32 * 16, v = 32 * 16, o = 32 * 32, mlp = 3 * 32 * 48;
    return 2 * (q + k + v + o + mlp) + 37 * 32; /* + the LM head, tied or not */
}

static void matmul_params(void **state)
{
    (void)state;
    ft_error err;
    for (int tied = 0; tied < 2; tied++) {
        ft_model_config c = test_tiny_config();
        c.tie_word_embeddings = tied;
        ft_model_layout l;
        TEST_CHECK_OK(ft_model_layout_build(&l, &c, &err), &err);
        assert_int_equal(ft_mfu_matmul_params(&l), hand_matmul_params());
        assert_true(ft_mfu_flops_per_key(&c) == 12.0 * 2 * 4 * 8);
        ft_model_layout_free(&l);
    }
}

static void visible_keys(void **state)
{
    (void)state;
    /* two rows of T = 8 (stride 9): documents of 3 and 5 tokens, then one of 8 */
    const int32_t seg[18] = { 0, 0, 0, 1, 1, 1, 1, 1, 1, /**/ 4, 4, 4, 4, 4, 4, 4, 4, 4 };
    /* no window: 1+2+3 + 1+2+3+4+5 = 21; 1+...+8 = 36 */
    assert_int_equal(ft_mfu_visible_keys(seg, 1, 9, 8, 0), 21);
    assert_int_equal(ft_mfu_visible_keys(seg, 2, 9, 8, 0), 21 + 36);
    /* window 3: 1+2+3 + 1+2+3+3+3 = 18; 1+2+3*6 = 21 */
    assert_int_equal(ft_mfu_visible_keys(seg, 2, 9, 8, 3), 18 + 21);
    /* no segment ids: one document per row */
    assert_int_equal(ft_mfu_visible_keys(NULL, 2, 9, 8, 3), 2 * 21);
    assert_int_equal(ft_mfu_visible_keys(NULL, 1, 9, 8, 0), 36);
    /* a window of 1: every query sees itself only */
    assert_int_equal(ft_mfu_visible_keys(seg, 2, 9, 8, 1), 16);

    /* the step's model FLOPs of the two rows with a window of 3, as the trainer adds them */
    ft_model_config c = test_tiny_config();
    c.family = FT_FAMILY_MISTRAL;
    c.sliding_window = 3;
    ft_model_layout l;
    ft_error err;
    TEST_CHECK_OK(ft_model_layout_build(&l, &c, &err), &err);
    const double flops = 6.0 * (double)ft_mfu_matmul_params(&l) * 16 +
                         ft_mfu_flops_per_key(&c) *
                             (double)ft_mfu_visible_keys(seg, 2, 9, 8, c.sliding_window);
    assert_true(flops == 6.0 * 16544 * 16 + 768.0 * 39);
    assert_int_equal(hand_matmul_params(), 16544);
    ft_model_layout_free(&l);
}

static void peak_table(void **state)
{
    (void)state;
    const struct {
        const char *name, *row;
        double bf16;
    } cases[] = {
        { "NVIDIA H100 80GB HBM3", "H100 SXM", 989.5 },
        { "NVIDIA H100 PCIe", "H100 PCIe", 756.5 },
        { "NVIDIA H100 NVL", "H100 NVL", 835.5 },
        { "NVIDIA H200", "H200 SXM", 989.5 },
        { "NVIDIA H200 NVL", "H200 NVL", 835.5 },
        { "NVIDIA GH200 480GB", "GH200", 989.5 },
        { "NVIDIA A100-SXM4-80GB", "A100 SXM", 312.0 },
        { "NVIDIA A100-SXM4-40GB", "A100 SXM", 312.0 },
        { "NVIDIA A100-PCIE-40GB", "A100 PCIe", 312.0 },
        { "NVIDIA A100 80GB PCIe", "A100 PCIe", 312.0 },
        { "NVIDIA L40S", "L40S", 362.05 },
        { "NVIDIA L40", "L40", 181.05 },
        { "NVIDIA B200", "B200", 2250.0 },
        { "NVIDIA H100 80GB HBM3 (cudaemu)", "H100 SXM", 989.5 }, /* the harness's stand-in */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ft_peak_row *r = ft_mfu_peak_row(cases[i].name);
        assert_non_null(r);
        if (strcmp(r->label, cases[i].row) != 0)
            print_error("%s: row %s, want %s\n", cases[i].name, r->label, cases[i].row);
        assert_string_equal(r->label, cases[i].row);
        assert_true(r->bf16 == cases[i].bf16);
        assert_true(r->fp32 > 0 && r->tf32 > r->fp32 / 2 && r->bf16 >= r->tf32);
    }
    assert_null(ft_mfu_peak_row("NVIDIA GeForce RTX 4090"));
    assert_null(ft_mfu_peak_row("NVIDIA L4"));
    assert_null(ft_mfu_peak_row(NULL));
}

static void peak_choice(void **state)
{
    (void)state;
    ft_peak p;
    ft_mfu_choose_peak(0, false, "NVIDIA H100 80GB HBM3", FT_DTYPE_BF16, &p);
    assert_true(p.flops == 989.5e12);
    assert_non_null(strstr(p.source, "H100 SXM"));
    ft_mfu_choose_peak(0, false, "NVIDIA H100 PCIe", FT_DTYPE_F32, &p);
    assert_true(p.flops == 51.0e12); /* fp32 recipe: CUBLAS_COMPUTE_32F, no TF32 */
    ft_mfu_choose_peak(400, false, "NVIDIA H100 80GB HBM3", FT_DTYPE_BF16, &p);
    assert_true(p.flops == 400e12);
    assert_non_null(strstr(p.source, "peak_tflops"));
    ft_mfu_choose_peak(0, true, "AMD EPYC 9R14", FT_DTYPE_F32, &p);
    assert_true(p.flops == 0);
    assert_non_null(strstr(p.source, "peak_tflops"));
    ft_mfu_choose_peak(2.5, true, "AMD EPYC 9R14", FT_DTYPE_F32, &p);
    assert_true(p.flops == 2.5e12);
    ft_mfu_choose_peak(0, false, "NVIDIA GeForce RTX 4090", FT_DTYPE_BF16, &p);
    assert_true(p.flops == 0);
    assert_non_null(strstr(p.source, "RTX 4090"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matmul_params),
        cmocka_unit_test(visible_keys),
        cmocka_unit_test(peak_table),
        cmocka_unit_test(peak_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
