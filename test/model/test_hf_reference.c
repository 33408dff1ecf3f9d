/* The CPU model against Hugging Face LlamaForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, MistralForCausalLM, GPTNeoXForCausalLM and GPTJForCausalLM:
 * logits, loss, every gradient and the weights after three AdamW steps, from the
 * golden files written by test/reference/gen_hf_reference.py and
 * gen_hf_reference_gpt.py (committed under test/data/hf). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/golden.h"
#include "../common/test_env.h"
#include "io/h5file.h"
#include "io/weights.h"

typedef struct golden {
    ft_h5file f;
    ft_model_layout layout;
    golden_batch b;
} golden;

static void golden_open(golden *g, const char *file)
{
    char path[1024];
    ft_error err;
    test_data_path(path, sizeof path, file);
    TEST_CHECK_OK(ft_h5_open(&g->f, path, MPI_COMM_SELF, &err), &err);
    ft_model_config c;
    TEST_CHECK_OK(ft_weights_read_config(&g->f, &c, &err), &err);
    TEST_CHECK_OK(ft_model_layout_build(&g->layout, &c, &err), &err);
    golden_batch_read(&g->f, &g->b);
}

static void golden_close(golden *g)
{
    golden_batch_free(&g->b);
    ft_model_layout_free(&g->layout);
    ft_h5_close(&g->f, NULL);
}

/* The largest relative error of the engine's gradients against the golden's, over
 * every tensor; tensors at or above `report` are printed with their error. */
static double worst_grad_err(golden *g, ft_engine *engine, double report, const char *what)
{
    double worst = 0;
    for (int u = 0; u < g->layout.n_units; u++) {
        const ft_unit_layout *ul = &g->layout.units[u];
        float *grads = malloc(ul->numel * sizeof *grads);
        ft_engine_download_grads(engine, u, grads);
        for (int t = 0; t < ul->n_tensors; t++) {
            const ft_tensor_info *ti = &ul->tensors[t];
            char name[256];
            snprintf(name, sizeof name, "/expected/grad/%s", ti->name);
            float *w = malloc(ti->numel * sizeof *w);
            golden_read(&g->f, name, H5T_NATIVE_FLOAT, w);
            double e = golden_rel_err(grads + ti->offset, w, ti->numel);
            if (e > worst)
                worst = e;
            if (e >= report)
                printf("  %s %s rel err %.3e\n", what, ti->name, e);
            free(w);
        }
        free(grads);
    }
    return worst;
}

typedef struct rig {
    ft_backend *be;
    ft_comm *comm;
    ft_engine *engine;
    ft_model *model;
} rig;

/* dt: the recipe's storage of working parameters and activations (fp32, or bf16 for
 * precision = "bf16") */
static void rig_up_dtype(rig *r, golden *g, int ckpt, ft_optimizer_type opt, ft_dtype dt)
{
    ft_error err;
    TEST_CHECK_OK(ft_backend_cpu_create(&r->be, &err), &err);
    TEST_CHECK_OK(ft_comm_mpi_create(&r->comm, &err), &err);
    ft_engine_options eo = { .zero_stage = 0,
                             .precision = ft_precision_resolve(dt, dt, FT_DTYPE_F32),
                             .optimizer = opt };
    TEST_CHECK_OK(ft_engine_create(&r->engine, &g->layout, r->be, r->comm, &eo, &err), &err);
    TEST_CHECK_OK(ft_engine_load(r->engine, &g->f, "/model", &err), &err);
    ft_model_options mo = { .max_batch = g->b.B, .seq_len = g->b.T, .activation_checkpointing = ckpt,
                            .head_group_rows = 11, .head_chunk_rows = 7 /* several groups
                            of several chunks, partial ones too */,
                            .dtype = dt };
    TEST_CHECK_OK(ft_model_create(&r->model, &g->layout, r->be, &mo, &err), &err);
}

static void rig_up(rig *r, golden *g, int ckpt, ft_optimizer_type opt)
{
    rig_up_dtype(r, g, ckpt, opt, FT_DTYPE_F32);
}

static void rig_down(rig *r)
{
    ft_model_free(r->model);
    ft_engine_free(r->engine);
    ft_comm_destroy(r->comm);
    ft_backend_destroy(r->be);
}

static ft_host_batch batch_of(const golden *g)
{
    return (ft_host_batch){ .batch = g->b.B, .seq_len = g->b.T, .tokens = g->b.tokens,
                            .loss_mask = g->b.mask, .segment = g->b.segment };
}

static void check_forward_and_grads(const char *file, int ckpt)
{
    golden g;
    golden_open(&g, file);
    rig r;
    rig_up(&r, &g, ckpt, FT_OPT_ADAMW);
    ft_error err;
    const int V = g.layout.config.vocab_size;
    ft_host_batch b = batch_of(&g);
    ft_param_source src = ft_engine_param_source(r.engine);

    /* logits */
    size_t nl = (size_t)g.b.B * g.b.T * V;
    float *logits = malloc(nl * sizeof *logits), *want = malloc(nl * sizeof *want);
    TEST_CHECK_OK(ft_model_logits(r.model, &src, &b, logits, &err), &err);
    golden_read(&g.f, "/expected/logits", H5T_NATIVE_FLOAT, want);
    double e_logits = golden_rel_err(logits, want, nl);
    printf("%s: logits rel err %.3e\n", file, e_logits);
    assert_true(e_logits < 1e-5);

    /* loss and gradients: grad_scale = 1 / number of targets */
    const long n_targets = g.b.n_targets;
    double loss_sum, want_loss;
    long nt;
    ft_engine_zero_grads(r.engine);
    TEST_CHECK_OK(ft_model_train_micro(r.model, &src, &b, 1.0f / (float)n_targets, &loss_sum, &nt,
                                       &err), &err);
    assert_int_equal(nt, n_targets);
    golden_read(&g.f, "/expected/loss", H5T_NATIVE_DOUBLE, &want_loss);
    double loss = loss_sum / (double)nt;
    printf("%s: loss %.8f want %.8f rel %.2e\n", file, loss, want_loss,
           fabs(loss - want_loss) / want_loss);
    assert_true(fabs(loss - want_loss) / want_loss < 1e-5);

    double worst = worst_grad_err(&g, r.engine, 1e-4, "grad");
    assert_true(worst < 1e-4);
    printf("%s: worst gradient rel err %.3e (checkpointing %s)\n", file, worst, ckpt ? "on" : "off");
    free(logits);
    free(want);
    rig_down(&r);
    golden_close(&g);
}

static void check_adamw(const char *file)
{
    golden g;
    golden_open(&g, file);
    rig r;
    rig_up(&r, &g, 1, FT_OPT_ADAMW);
    ft_error err;
    const ft_optimizer_config oc = golden_adamw(&g.f);
    ft_host_batch b = batch_of(&g);
    ft_param_source src = ft_engine_param_source(r.engine);
    const long n_targets = g.b.n_targets;
    for (int step = 1; step <= 3; step++) {
        double loss_sum, want;
        long nt;
        ft_engine_zero_grads(r.engine);
        TEST_CHECK_OK(ft_model_train_micro(r.model, &src, &b, 1.0f / (float)n_targets, &loss_sum,
                                           &nt, &err), &err);
        TEST_CHECK_OK(ft_engine_step(r.engine, &oc, oc.lr, 1.0, &err), &err);
        char name[64];
        snprintf(name, sizeof name, "/expected/adamw/step%d/loss", step);
        golden_read(&g.f, name, H5T_NATIVE_DOUBLE, &want);
        printf("%s: adamw step %d loss %.7f want %.7f\n", file, step, loss_sum / nt, want);
        assert_true(fabs(loss_sum / nt - want) / want < 1e-5);
    }
    /* Adam's step is lr * m / (sqrt(v) + eps): where |g| is within a few orders of
     * eps (1e-8) the direction depends on the last bits of g, which legitimately differ
     * between implementations. So: elements whose first-step gradient is >= 1e-6 must
     * agree to 1e-4 absolute (1 % of lr; later steps can still meet small gradients); the
     * others only within 3 steps of 10 % of lr
     * each, which still catches a wrong decay, bias correction or schedule. */
    double worst = 0, worst_loose = 0;
    size_t n_tight = 0, n_loose = 0;
    for (int u = 0; u < g.layout.n_units; u++) {
        const ft_unit_layout *ul = &g.layout.units[u];
        float *p = malloc(ul->numel * sizeof *p);
        TEST_CHECK_OK(ft_engine_download_params(r.engine, u, p, &err), &err);
        for (int t = 0; t < ul->n_tensors; t++) {
            const ft_tensor_info *ti = &ul->tensors[t];
            char name[256];
            float *w = malloc(ti->numel * sizeof *w), *g1 = malloc(ti->numel * sizeof *g1);
            snprintf(name, sizeof name, "/expected/adamw/after/%s", ti->name);
            golden_read(&g.f, name, H5T_NATIVE_FLOAT, w);
            snprintf(name, sizeof name, "/expected/grad/%s", ti->name);
            golden_read(&g.f, name, H5T_NATIVE_FLOAT, g1);
            for (size_t i = 0; i < ti->numel; i++) {
                double d = fabs((double)p[ti->offset + i] - w[i]);
                if (fabs(g1[i]) >= 1e-6) {
                    n_tight++;
                    if (d > 1e-4)
                        printf("  %s[%zu]: %.8g, HF %.8g (first-step grad %.3g)\n", ti->name, i,
                               p[ti->offset + i], w[i], g1[i]);
                    if (d > worst)
                        worst = d;
                } else {
                    n_loose++;
                    if (d > worst_loose)
                        worst_loose = d;
                }
            }
            free(w);
            free(g1);
        }
        free(p);
    }
    printf("%s: after 3 AdamW steps: max abs diff %.3e over %zu weights with |g| >= 1e-6, "
           "%.3e over %zu others\n", file, worst, n_tight, worst_loose, n_loose);
    assert_true(worst < 1e-4);
    assert_true(worst_loose < 3 * 0.1 * oc.lr);
    rig_down(&r);
    golden_close(&g);
}

/* The bf16 recipe (bf16 working weights, activations, GEMM operands and, in the
 * training head, logits but GPT-J's; fp32 norms' statistics, softmax, loss and gradient
 * accumulation) against the fp32 golden: equal to bf16 resolution. Measured (max |diff| / max |golden| per tensor):
 * logits 4e-3 .. 8e-3, loss < 1e-4, gradients 1e-2 (hf_gptj; Llama's hf_basic
 * 1.3e-2) except the last layer's q/k weights of GPT-NeoX, 5e-2 .. 8e-2, where
 * PyTorch's own bf16 run is at 2.5e-2: with partial rotary the keys share a large
 * position-independent mean, which the true dq excludes (softmax rows sum to 1) but
 * the flash backward's D = rowsum(dO * O), taken from the bf16-rounded O, injects
 * (full rotary on the same weights: 3.6e-2). The bounds sit above that and far below
 * what a wrong switch gives (order 1). */
static void check_bf16_recipe(const char *file)
{
    golden g;
    golden_open(&g, file);
    rig r;
    rig_up_dtype(&r, &g, 1, FT_OPT_ADAMW, FT_DTYPE_BF16);
    ft_error err;
    const int V = g.layout.config.vocab_size;
    ft_host_batch b = batch_of(&g);
    ft_param_source src = ft_engine_param_source(r.engine);
    size_t nl = (size_t)g.b.B * g.b.T * V;
    float *logits = malloc(nl * sizeof *logits), *want = malloc(nl * sizeof *want);
    TEST_CHECK_OK(ft_model_logits(r.model, &src, &b, logits, &err), &err);
    golden_read(&g.f, "/expected/logits", H5T_NATIVE_FLOAT, want);
    double e_logits = golden_rel_err(logits, want, nl);
    const long n_targets = g.b.n_targets;
    double loss_sum, want_loss;
    long nt;
    ft_engine_zero_grads(r.engine);
    TEST_CHECK_OK(ft_model_train_micro(r.model, &src, &b, 1.0f / (float)n_targets, &loss_sum, &nt,
                                       &err), &err);
    golden_read(&g.f, "/expected/loss", H5T_NATIVE_DOUBLE, &want_loss);
    double e_loss = fabs(loss_sum / nt - want_loss) / want_loss;
    double worst = worst_grad_err(&g, r.engine, 3e-2, "bf16 grad");
    printf("%s: bf16 recipe: logits rel err %.3e, loss %.3e, worst gradient %.3e\n", file,
           e_logits, e_loss, worst);
    assert_true(e_logits < 2e-2);
    assert_true(e_loss < 1e-3);
    assert_true(worst < 0.15);
    free(logits);
    free(want);
    rig_down(&r);
    golden_close(&g);
}

static void test_basic(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_basic.h5", 0); }
static void test_basic_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_basic.h5", 1); }
static void test_llama3rope_docs(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_llama3rope.h5", 0); }
static void test_tied(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_tied.h5", 1); }
static void test_adamw_basic(void **s) { (void)s; check_adamw("test/data/hf/hf_basic.h5"); }
static void test_adamw_tied(void **s) { (void)s; check_adamw("test/data/hf/hf_tied.h5"); }
/* The families (model/family.h), each with packed documents and with activation
 * checkpointing on and off. */
static void test_qwen2_docs(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_qwen2.h5", 0); }
static void test_qwen2_tied_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_qwen2_tied.h5", 1); }
static void test_qwen3_docs(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_qwen3.h5", 0); }
static void test_qwen3_docs_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_qwen3.h5", 1); }
static void test_mistral_window(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_mistral.h5", 0); }
static void test_mistral_window_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_mistral.h5", 1); }
static void test_adamw_qwen2(void **s) { (void)s; check_adamw("test/data/hf/hf_qwen2.h5"); }
static void test_adamw_qwen2_tied(void **s) { (void)s; check_adamw("test/data/hf/hf_qwen2_tied.h5"); }
static void test_adamw_qwen3(void **s) { (void)s; check_adamw("test/data/hf/hf_qwen3.h5"); }
static void test_adamw_mistral(void **s) { (void)s; check_adamw("test/data/hf/hf_mistral.h5"); }
/* GPT-NeoX: parallel residual, exact GELU, attention biases, rotary_pct 0.25, packed
 * documents; sequential residual, tanh GELU, no attention biases, rotary_pct 0.5.
 * GPT-J: shared norm, interleaved rotary_dim 8 of 16, lm_head bias, packed documents. */
static void test_neox_docs(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_neox.h5", 0); }
static void test_neox_seq_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_neox_seq.h5", 1); }
static void test_gptj_docs(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_gptj.h5", 0); }
static void test_gptj_docs_ckpt(void **s) { (void)s; check_forward_and_grads("test/data/hf/hf_gptj.h5", 1); }
static void test_adamw_neox(void **s) { (void)s; check_adamw("test/data/hf/hf_neox.h5"); }
static void test_adamw_neox_seq(void **s) { (void)s; check_adamw("test/data/hf/hf_neox_seq.h5"); }
static void test_adamw_gptj(void **s) { (void)s; check_adamw("test/data/hf/hf_gptj.h5"); }
static void test_bf16_neox(void **s) { (void)s; check_bf16_recipe("test/data/hf/hf_neox.h5"); }
static void test_bf16_neox_seq(void **s) { (void)s; check_bf16_recipe("test/data/hf/hf_neox_seq.h5"); }
static void test_bf16_gptj(void **s) { (void)s; check_bf16_recipe("test/data/hf/hf_gptj.h5"); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_basic_ckpt),
        cmocka_unit_test(test_llama3rope_docs),
        cmocka_unit_test(test_tied),
        cmocka_unit_test(test_adamw_basic),
        cmocka_unit_test(test_adamw_tied),
        cmocka_unit_test(test_qwen2_docs),
        cmocka_unit_test(test_qwen2_tied_ckpt),
        cmocka_unit_test(test_qwen3_docs),
        cmocka_unit_test(test_qwen3_docs_ckpt),
        cmocka_unit_test(test_mistral_window),
        cmocka_unit_test(test_mistral_window_ckpt),
        cmocka_unit_test(test_adamw_qwen2),
        cmocka_unit_test(test_adamw_qwen2_tied),
        cmocka_unit_test(test_adamw_qwen3),
        cmocka_unit_test(test_adamw_mistral),
        cmocka_unit_test(test_neox_docs),
        cmocka_unit_test(test_neox_seq_ckpt),
        cmocka_unit_test(test_gptj_docs),
        cmocka_unit_test(test_gptj_docs_ckpt),
        cmocka_unit_test(test_adamw_neox),
        cmocka_unit_test(test_adamw_neox_seq),
        cmocka_unit_test(test_adamw_gptj),
        cmocka_unit_test(test_bf16_neox),
        cmocka_unit_test(test_bf16_neox_seq),
        cmocka_unit_test(test_bf16_gptj),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
