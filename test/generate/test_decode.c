/* KV-cached decoding against the trainer's full forward (ft_model_logits).
 *
 * For a model and a prompt, greedy decoding with the cache produces N tokens and the
 * logits of every step. The trainer's forward on prompt + generated must then give,
 * at every generated position, the same logits (|err| <= 1e-5 * max|logit| + 1e-6)
 * and an argmax equal to the generated token. Models: a random tiny GQA model and
 * the three Hugging Face golden weights files (untied, tied, Llama 3.1 RoPE
 * scaling). Also: prefill in chunks equals prefill at once; a reset decoder repeats
 * itself bit for bit; ft_generate equals the hand-written loop and stops at stop
 * ids, at max_new_tokens and when the context is full.
 *
 * bf16: parameters stored in bf16 (a bf16 checkpoint) decode in bf16; the cached
 * decode's logits then equal the trainer's bf16 forward within bf16 tolerance
 * (BF16_REL of max|logit|: the two attentions sum in other orders before the one
 * rounding of their bf16 output, and the difference propagates through the
 * layers), and differ from the fp32 decode of the same values by more than that
 * tolerance's floor (the decode really ran in bf16). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "generate/decoder.h"
#include "generate/gen_params.h"
#include "generate/generate.h"
#include "generate/sampler.h"
#include "util/bf16.h"
#include "util/rng.h"

#define LOGIT_REL 1e-5
#define LOGIT_ABS 1e-6
#define BF16_REL 2e-2

static ft_backend *be;
static double logit_rel = LOGIT_REL, logit_abs = LOGIT_ABS; /* the precision's tolerance */

static ft_gen_params *load_hf(const char *name)
{
    char path[1024];
    char rel[128];
    snprintf(rel, sizeof rel, "test/data/hf/%s", name);
    test_data_path(path, sizeof path, rel);
    ft_gen_params *p;
    ft_error err;
    TEST_CHECK_OK(ft_gen_params_load(&p, path, FT_GEN_PARAMS_AUTO, false, be, &err), &err);
    return p;
}

static ft_gen_params *random_tiny_as(ft_dtype dt)
{
    ft_model_config c = test_tiny_config();
    ft_gen_params *p;
    ft_error err;
    TEST_CHECK_OK(ft_gen_params_init_random(&p, &c, 11, 0.2, dt, be, &err), &err);
    return p;
}

static ft_gen_params *random_tiny(void)
{
    ft_gen_params *p = random_tiny_as(FT_DTYPE_F32);
    return p;
}

static void random_prompt(int32_t *ids, int n, int vocab, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        ids[i] = (int32_t)(ft_rng_u64(seed, 5, (uint64_t)i) % (uint64_t)vocab);
}

/* Greedy with the cache: gen[N] and the logits of each step, [N, V]. */
static void cached_greedy(ft_gen_params *p, const int32_t *prompt, int P, int N, int chunk,
                          int32_t *gen, float *logits)
{
    const int V = p->layout.config.vocab_size;
    ft_param_source src = ft_gen_params_source(p);
    ft_decoder_options o = { .capacity = P + N, .max_chunk = chunk, .dtype = p->dtype };
    ft_decoder *d;
    ft_error err;
    TEST_CHECK_OK(ft_decoder_create(&d, &p->layout, be, &src, &o, &err), &err);
    TEST_CHECK_OK(ft_decoder_append(d, prompt, P, logits, &err), &err);
    for (int t = 0; t < N; t++) {
        gen[t] = ft_argmax(logits + (size_t)t * V, V);
        if (t + 1 < N)
            TEST_CHECK_OK(ft_decoder_append(d, &gen[t], 1, logits + (size_t)(t + 1) * V, &err),
                          &err);
    }
    assert_int_equal(ft_decoder_len(d), P + N - 1);
    ft_decoder_free(d);
}

/* The trainer's forward on seq[0..n): logits of positions 0..n-2, [n-1, V]. */
static float *full_logits(ft_gen_params *p, const int32_t *seq, int n)
{
    const int T = n - 1, V = p->layout.config.vocab_size;
    ft_model_options mo = { .max_batch = 1, .seq_len = T, .activation_checkpointing = false,
                            .head_chunk_rows = 4, .dtype = p->dtype };
    ft_model *m;
    ft_error err;
    TEST_CHECK_OK(ft_model_create(&m, &p->layout, be, &mo, &err), &err);
    uint32_t *tok = malloc((size_t)n * sizeof *tok);
    uint8_t *mask = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        tok[i] = (uint32_t)seq[i];
        mask[i] = i > 0;
    }
    ft_host_batch b = { .batch = 1, .seq_len = T, .tokens = tok, .loss_mask = mask,
                        .segment = NULL };
    float *logits = malloc((size_t)T * V * sizeof(float));
    ft_param_source src = ft_gen_params_source(p);
    TEST_CHECK_OK(ft_model_logits(m, &src, &b, logits, &err), &err);
    ft_model_free(m);
    free(tok);
    free(mask);
    return logits;
}

static double max_abs(const float *x, int n)
{
    double m = 0.0;
    for (int i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* The largest |a-b| relative to max|b| over rows of V logits, and checks it. */
static double compare_rows(const float *a, const float *b, int rows, int V, const char *what)
{
    double worst = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
        const double scale = max_abs(y, V);
        for (int i = 0; i < V; i++) {
            double e = fabs((double)x[i] - y[i]);
            if (!(e <= logit_rel * scale + logit_abs)) {
                fprintf(stderr, "%s: row %d id %d: %.8g vs %.8g (max|logit| %.4g)\n", what, r,
                        i, x[i], y[i], scale);
                fail();
            }
            worst = e / (scale > 0 ? scale : 1) > worst ? e / (scale > 0 ? scale : 1) : worst;
        }
    }
    return worst;
}

static void check_against_full(ft_gen_params *p, int P, int N, int chunk, uint64_t seed,
                               const char *what)
{
    const int V = p->layout.config.vocab_size;
    int32_t *seq = malloc((size_t)(P + N) * sizeof *seq);
    float *step_logits = malloc((size_t)N * V * sizeof(float));
    random_prompt(seq, P, V, seed);
    cached_greedy(p, seq, P, N, chunk, seq + P, step_logits);
    float *full = full_logits(p, seq, P + N);
    /* position P-1+t predicts generated token t */
    const float *full_gen = full + (size_t)(P - 1) * V;
    double worst = compare_rows(step_logits, full_gen, N, V, what);
    for (int t = 0; t < N; t++) {
        const float *row = full_gen + (size_t)t * V;
        int32_t am = ft_argmax(row, V);
        /* a tie within rounding may pick either token */
        if (am != seq[P + t] &&
            fabs(row[am] - row[seq[P + t]]) > logit_rel * max_abs(row, V) + logit_abs) {
            fprintf(stderr, "%s: step %d: generated %d, full forward argmax %d\n", what, t,
                    seq[P + t], am);
            fail();
        }
    }
    printf("%-28s P=%2d N=%2d chunk=%3d: max rel logit error %.2e\n", what, P, N, chunk, worst);
    free(seq);
    free(step_logits);
    free(full);
}

static void test_random_tiny(void **state)
{
    ft_gen_params *p = random_tiny();
    check_against_full(p, 1, 20, 0, 1, "random tiny (BOS only)");
    check_against_full(p, 9, 16, 0, 2, "random tiny");
    check_against_full(p, 30, 30, 0, 3, "random tiny, long");
    ft_gen_params_free(p);
}

static void test_hf_weights(void **state)
{
    const char *files[] = { "hf_basic.h5", "hf_tied.h5", "hf_llama3rope.h5", "hf_qwen2.h5",
                            "hf_qwen2_tied.h5", "hf_qwen3.h5", "hf_mistral.h5", "hf_neox.h5",
                            "hf_neox_seq.h5", "hf_gptj.h5" };
    for (int f = 0; f < (int)(sizeof files / sizeof files[0]); f++) {
        ft_gen_params *p = load_hf(files[f]);
        check_against_full(p, 7, 24, 0, 10 + (uint64_t)f, files[f]);
        check_against_full(p, 40, 24, 0, 20 + (uint64_t)f, files[f]); /* up to max_pos 64 */
        ft_gen_params_free(p);
    }
}

/* Prefill in chunks (the later ones through attention_decode) equals the trainer. */
static void test_chunked_prefill(void **state)
{
    ft_gen_params *p = load_hf("hf_basic.h5");
    check_against_full(p, 23, 8, 5, 30, "hf_basic, chunks of 5");
    check_against_full(p, 23, 8, 1, 31, "hf_basic, chunks of 1");
    ft_gen_params_free(p);
    /* sliding window of 5: chunks and single tokens see only the window's keys */
    p = load_hf("hf_mistral.h5");
    check_against_full(p, 23, 8, 5, 32, "hf_mistral, chunks of 5");
    check_against_full(p, 23, 8, 1, 33, "hf_mistral, chunks of 1");
    ft_gen_params_free(p);
    /* GPT-J: interleaved partial rotary at positions past 0 through the decode path */
    p = load_hf("hf_gptj.h5");
    check_against_full(p, 23, 8, 5, 34, "hf_gptj, chunks of 5");
    ft_gen_params_free(p);
}

static ft_decoder *make_decoder(ft_gen_params *p, ft_param_source *src, int capacity)
{
    *src = ft_gen_params_source(p);
    ft_decoder_options o = { .capacity = capacity, .dtype = p->dtype };
    ft_decoder *d;
    ft_error err;
    TEST_CHECK_OK(ft_decoder_create(&d, &p->layout, be, src, &o, &err), &err);
    return d;
}

/* ft_generate (greedy) == the hand loop; reset repeats bit for bit; stop rules. */
static void test_generate_loop(void **state)
{
    ft_gen_params *p = load_hf("hf_basic.h5");
    const int V = p->layout.config.vocab_size, P = 6, N = 12;
    int32_t prompt[64], want[N];
    float *logits = malloc((size_t)N * V * sizeof(float));
    random_prompt(prompt, P, V, 40);
    cached_greedy(p, prompt, P, N, 0, want, logits);

    ft_param_source src;
    ft_decoder *d = make_decoder(p, &src, 64);
    ft_sampler *s;
    ft_error err;
    ft_sampler_config sc = { .temperature = 0.0, .top_p = 1.0 };
    TEST_CHECK_OK(ft_sampler_create(&s, &sc, V, &err), &err);
    ft_gen_options go = { .max_new_tokens = N };
    ft_gen_result r1, r2;
    TEST_CHECK_OK(ft_generate(d, s, prompt, P, &go, 0, &r1, &err), &err);
    assert_int_equal(r1.n, N);
    assert_int_equal(r1.stop, FT_STOP_LENGTH);
    assert_memory_equal(r1.ids, want, sizeof want);
    TEST_CHECK_OK(ft_generate(d, s, prompt, P, &go, 0, &r2, &err), &err); /* reused decoder */
    assert_memory_equal(r2.ids, r1.ids, sizeof want);
    free(r2.ids);

    /* a stop id ends the completion before it and is not part of it */
    int32_t stop = want[5];
    int first = 0;
    while (want[first] != stop)
        first++;
    go.stop_ids = &stop;
    go.n_stop = 1;
    TEST_CHECK_OK(ft_generate(d, s, prompt, P, &go, 0, &r2, &err), &err);
    assert_int_equal(r2.stop, FT_STOP_EOS);
    assert_int_equal(r2.n, first);
    assert_memory_equal(r2.ids, want, (size_t)first * sizeof(int32_t));
    free(r2.ids);

    /* context: a 60-token prompt in a 64-position cache yields 64 - 60 + 1 tokens */
    random_prompt(prompt, 60, V, 41);
    go = (ft_gen_options){ .max_new_tokens = 10 };
    TEST_CHECK_OK(ft_generate(d, s, prompt, 60, &go, 0, &r2, &err), &err);
    assert_int_equal(r2.stop, FT_STOP_CONTEXT);
    assert_int_equal(r2.n, 5);
    free(r2.ids);

    /* a prompt longer than the cache is refused with a message */
    random_prompt(prompt, 64, V, 42);
    ft_decoder_free(d);
    d = make_decoder(p, &src, 32);
    assert_int_not_equal(ft_generate(d, s, prompt, 40, &go, 0, &r2, &err), 0);
    assert_non_null(strstr(err.msg, "40 tokens"));
    /* an id outside the vocabulary too */
    prompt[3] = V;
    assert_int_not_equal(ft_generate(d, s, prompt, 8, &go, 0, &r2, &err), 0);
    assert_non_null(strstr(err.msg, "outside the model's vocabulary"));

    free(r1.ids);
    free(logits);
    ft_sampler_free(s);
    ft_decoder_free(d);
    ft_gen_params_free(p);
}

/* The same bf16 values decoded in fp32: [N, V] logits of the given sequence's steps
 * (teacher-forced on seq, so both precisions see the same tokens). */
static void forced_logits(ft_gen_params *p, const int32_t *seq, int P, int N, float *logits)
{
    const int V = p->layout.config.vocab_size;
    ft_param_source src;
    ft_decoder *d = make_decoder(p, &src, P + N);
    ft_error err;
    TEST_CHECK_OK(ft_decoder_append(d, seq, P, logits, &err), &err);
    for (int t = 1; t < N; t++)
        TEST_CHECK_OK(ft_decoder_append(d, &seq[P + t - 1], 1, logits + (size_t)t * V, &err),
                      &err);
    ft_decoder_free(d);
}

/* A bf16 checkpoint decodes in bf16: equal to the trainer's bf16 forward within bf16
 * tolerance, prefill at once and in chunks, and not the fp32 decode's numbers. */
static void test_bf16_decode(void **state)
{
    logit_rel = BF16_REL;
    logit_abs = 1e-3;
    ft_gen_params *p = random_tiny_as(FT_DTYPE_BF16);
    assert_int_equal(p->dtype, FT_DTYPE_BF16);
    check_against_full(p, 9, 16, 0, 50, "random tiny bf16");
    check_against_full(p, 23, 8, 5, 51, "random tiny bf16, chunks of 5");
    check_against_full(p, 23, 8, 1, 52, "random tiny bf16, chunks of 1");

    /* the same (bf16-exact) values in fp32 decode differently: bf16 ran */
    ft_gen_params *q = random_tiny_as(FT_DTYPE_F32);
    for (int u = 0; u < p->layout.n_units; u++) {
        const size_t n = p->layout.units[u].numel;
        uint16_t *bits = malloc(n * sizeof *bits);
        float *f = malloc(n * sizeof *f);
        be->ops->download(be, bits, p->units[u], n * sizeof *bits);
        be->ops->sync(be);
        for (size_t i = 0; i < n; i++)
            f[i] = ft_bf16_to_f32(bits[i]);
        be->ops->upload(be, q->units[u], f, n * sizeof *f);
        be->ops->sync(be);
        free(bits);
        free(f);
    }
    const int V = p->layout.config.vocab_size, P = 9, N = 8;
    int32_t seq[P + N];
    random_prompt(seq, P + N, V, 53);
    float *lb = malloc((size_t)N * V * sizeof(float)), *lf = malloc((size_t)N * V * sizeof(float));
    forced_logits(p, seq, P, N, lb);
    forced_logits(q, seq, P, N, lf);
    double diff = 0.0;
    for (size_t i = 0; i < (size_t)N * V; i++)
        diff = fmax(diff, fabs((double)lb[i] - lf[i]));
    printf("bf16 vs fp32 decode of bf16 values: max |logit difference| %.3g\n", diff);
    assert_true(diff > 1e-4);
    free(lb);
    free(lf);
    ft_gen_params_free(q);
    ft_gen_params_free(p);
    logit_rel = LOGIT_REL;
    logit_abs = LOGIT_ABS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ft_error err;
    if (ft_backend_cpu_create(&be, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_tiny),
        cmocka_unit_test(test_hf_weights),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_generate_loop),
        cmocka_unit_test(test_bf16_decode),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ft_backend_destroy(be);
    MPI_Finalize();
    return rc;
}
