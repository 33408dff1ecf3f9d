/* Self-consistency of the model on the CPU backend:
 *  - the analytic gradient of every tensor against central finite differences of
 *    the loss along a random direction in that tensor;
 *  - activation checkpointing on/off gives bitwise identical gradients;
 *  - a row packed with two documents (document masking) equals the two documents
 *    run separately: same loss sum and gradients;
 *  - bf16 parameter storage makes the working parameters exactly bf16 values;
 *  - the LM head computes logits only for rows with a target and accumulates its
 *    weight gradient once per group of rows (once per micro-batch by default). */
#include <math.h>
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "util/bf16.h"
#include "util/rng.h"

typedef struct rig {
    ft_backend *be;
    ft_comm *comm;
    ft_model_layout layout;
    ft_engine *engine;
    ft_dtype model_dt; /* the models' activations (make_model_opts): fp32 unless set */
} rig;

static void rig_up(rig *r, ft_model_config c, ft_dtype dtype)
{
    ft_error err;
    r->model_dt = FT_DTYPE_F32;
    TEST_CHECK_OK(ft_backend_cpu_create(&r->be, &err), &err);
    TEST_CHECK_OK(ft_comm_mpi_create(&r->comm, &err), &err);
    TEST_CHECK_OK(ft_model_layout_build(&r->layout, &c, &err), &err);
    ft_engine_options eo = { .zero_stage = 0,
                             .precision = ft_precision_resolve(FT_DTYPE_F32, dtype, FT_DTYPE_F32),
                             .optimizer = FT_OPT_ADAMW };
    TEST_CHECK_OK(ft_engine_create(&r->engine, &r->layout, r->be, r->comm, &eo, &err), &err);
    /* larger than usual init so that every path carries signal */
    TEST_CHECK_OK(ft_engine_init_random(r->engine, 7, 0.2, &err), &err);
}

static void rig_down(rig *r)
{
    ft_engine_free(r->engine);
    ft_model_layout_free(&r->layout);
    ft_comm_destroy(r->comm);
    ft_backend_destroy(r->be);
}

/* ckpt: 0 none, 1 every block, k > 1 the first k - 1 blocks (checkpoint_layers);
 * keep: what the recomputing blocks keep (checkpoint_keep) */
static ft_model *make_model_opts(rig *r, int batch, int T, int ckpt, ft_ckpt_keep keep,
                                 int group, int chunk)
{
    ft_error err;
    ft_model *m;
    ft_model_options mo = { .max_batch = batch, .seq_len = T, .activation_checkpointing = ckpt,
                            .checkpoint_layers = ckpt > 1 ? ckpt - 1 : 0,
                            .checkpoint_keep = keep,
                            .head_group_rows = group, .head_chunk_rows = chunk,
                            .dtype = r->model_dt };
    TEST_CHECK_OK(ft_model_create(&m, &r->layout, r->be, &mo, &err), &err);
    return m;
}

static ft_model *make_model_head(rig *r, int batch, int T, int ckpt, int group, int chunk)
{
    return make_model_opts(r, batch, T, ckpt, FT_CKPT_KEEP_NOTHING, group, chunk);
}

/* Several head groups of several chunks, partial ones too. */
static ft_model *make_model(rig *r, int batch, int T, int ckpt)
{
    return make_model_head(r, batch, T, ckpt, 8, 5);
}

typedef struct rows {
    int B, T;
    uint32_t tokens[64 * 3];
    uint8_t mask[64 * 3];
    int32_t segment[64 * 3];
} rows;

static void random_rows(rows *x, int B, int T, int V, uint64_t seed, int two_docs)
{
    x->B = B;
    x->T = T;
    for (int i = 0; i < B * (T + 1); i++) {
        int col = i % (T + 1);
        x->tokens[i] = (uint32_t)(ft_rng_u64(seed, 3, (uint64_t)i) % (uint64_t)V);
        x->mask[i] = col > 0 && ft_rng_uniform(seed, 4, (uint64_t)i) < 0.85;
        x->segment[i] = two_docs && col >= (T + 1) / 2 ? 1 : 0;
        if (two_docs && col == (T + 1) / 2)
            x->mask[i] = 0; /* first token of a document is not a target */
    }
}

static ft_host_batch as_batch(rows *x, int with_segments)
{
    return (ft_host_batch){ .batch = x->B, .seq_len = x->T, .tokens = x->tokens,
                            .loss_mask = x->mask, .segment = with_segments ? x->segment : NULL };
}

static double loss_of(rig *r, ft_model *m, rows *x)
{
    ft_error err;
    ft_param_source src = ft_engine_param_source(r->engine);
    ft_host_batch b = as_batch(x, 1);
    double ls;
    long nt;
    TEST_CHECK_OK(ft_model_eval_micro(m, &src, &b, &ls, &nt, &err), &err);
    return ls;
}

static void grads_of(rig *r, ft_model *m, rows *x, int with_segments)
{
    ft_error err;
    ft_param_source src = ft_engine_param_source(r->engine);
    ft_host_batch b = as_batch(x, with_segments);
    double ls;
    long nt;
    TEST_CHECK_OK(ft_model_train_micro(m, &src, &b, 1.0f, &ls, &nt, &err), &err);
}

static float **snapshot_grads(rig *r)
{
    float **g = calloc((size_t)r->layout.n_units, sizeof *g);
    for (int u = 0; u < r->layout.n_units; u++) {
        g[u] = malloc(r->layout.units[u].numel * sizeof(float));
        ft_engine_download_grads(r->engine, u, g[u]);
    }
    return g;
}

static void free_snapshot(rig *r, float **g)
{
    for (int u = 0; u < r->layout.n_units; u++)
        free(g[u]);
    free(g);
}

/* d/dt L(theta + t d) at 0 by central differences, d random in one tensor only. */
static void check_tensor_fd(rig *r, ft_model *m, rows *x, float **grads, int u, int t)
{
    const ft_tensor_info *ti = &r->layout.units[u].tensors[t];
    ft_param_source src = ft_engine_param_source(r->engine);
    float *p = (float *)src.acquire(src.ctx, u) + ti->offset; /* CPU backend: host memory */
    const float *g = grads[u] + ti->offset;
    double *d = malloc(ti->numel * sizeof *d);
    double analytic = 0.0;
    for (size_t i = 0; i < ti->numel; i++) {
        d[i] = ft_rng_normal(11, (uint64_t)(u * 100 + t), i);
        analytic += d[i] * g[i];
    }
    float *saved = malloc(ti->numel * sizeof *saved);
    memcpy(saved, p, ti->numel * sizeof *saved);
    const double eps = 1e-2 / sqrt((double)ti->numel);
    double l[2];
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < ti->numel; i++)
            p[i] = (float)(saved[i] + (s ? -eps : eps) * d[i]);
        l[s] = loss_of(r, m, x);
    }
    memcpy(p, saved, ti->numel * sizeof *saved);
    const double fd = (l[0] - l[1]) / (2 * eps);
    /* fp32 loss round-off (~1e-6 of ~100) over 2 eps bounds the FD error. */
    const double tol = 2e-2 * fabs(analytic) + 2e-6 * fabs(l[0]) / eps;
    if (fabs(fd - analytic) > tol)
        printf("  %s: fd %.6e analytic %.6e\n", ti->name, fd, analytic);
    assert_true(fabs(fd - analytic) <= tol);
    free(saved);
    free(d);
}

static void test_gradient_fd(void **state)
{
    (void)state;
    ft_model_config configs[2] = { test_tiny_config(), test_tiny_config() };
    configs[1].tie_word_embeddings = true;
    configs[1].rope_scaling = (ft_rope_scaling){ FT_ROPE_SCALING_LLAMA3, 4.0, 1.0, 4.0, 16 };
    for (int k = 0; k < 2; k++) {
        rig r;
        rig_up(&r, configs[k], FT_DTYPE_F32);
        rows x;
        random_rows(&x, 2, 11, configs[k].vocab_size, 5, 1);
        ft_model *m = make_model(&r, 2, 11, 0);
        ft_engine_zero_grads(r.engine);
        grads_of(&r, m, &x, 1);
        float **g = snapshot_grads(&r);
        int checked = 0;
        for (int u = 0; u < r.layout.n_units; u++)
            for (int t = 0; t < r.layout.units[u].n_tensors; t++, checked++)
                check_tensor_fd(&r, m, &x, g, u, t);
        printf("config %d: %d tensors match finite differences\n", k, checked);
        free_snapshot(&r, g);
        ft_model_free(m);
        rig_down(&r);
    }
}

/* The backend's matmul, counted (the recompute's GEMMs). */
static const ft_backend_ops *counted_ops;
static long matmul_calls, attention_calls, swiglu_calls;

static void counting_all_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a,
                                const void *b, int m, int n, int k, bool trans_a, bool trans_b,
                                float alpha, float beta)
{
    matmul_calls++;
    counted_ops->matmul(be, t, c, a, b, m, n, k, trans_a, trans_b, alpha, beta);
}

/* a projection onto the residual stream (backend.h, matmul_add) is a GEMM too */
static void counting_all_matmul_add(ft_backend *be, ft_gemm_types t, void *d, const void *c,
                                    const void *a, const void *b, int m, int n, int k,
                                    bool trans_a, bool trans_b)
{
    matmul_calls++;
    counted_ops->matmul_add(be, t, d, c, a, b, m, n, k, trans_a, trans_b);
}

static void counting_attention_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse,
                                   const void *q, const void *k, const void *v,
                                   const int32_t *segment, ft_attn_shape s)
{
    attention_calls++;
    counted_ops->attention_fwd(be, dt, out, lse, q, k, v, segment, s);
}

/* the SwiGLU's forward, counted: a recompute leaves it to the backward (block.h,
 * act_in_backward) */
static void counting_swiglu_fwd(ft_backend *be, ft_dtype dt, void *out, const void *gate,
                                const void *up, size_t n)
{
    swiglu_calls++;
    counted_ops->swiglu_fwd(be, dt, out, gate, up, n);
}

/* With activation checkpointing the gradients are bitwise those without, for every
 * block wiring, for checkpointing of every block or of the first 1 or 2 of 3
 * (checkpoint_layers), keeping nothing, attention's output or the attention half
 * (checkpoint_keep); the recompute rebuilds only what the backward reads: every forward
 * GEMM but the MLP's down projection (and with a parallel residual the attention's output
 * projection), with the attention half kept only the MLP's gate and up projections and no
 * attention, with attention's output kept those GEMMs and no attention, for every
 * checkpointed block but the last (whose activations the forward left), so it costs
 * exactly that many GEMMs and attention calls, and no SwiGLU forward (the backward makes
 * its output). */
static void test_checkpointing_identical(void **state)
{
    (void)state;
    /* none, every block, the first 1 block, the first 2; then with attention or its
     * output kept */
    static const struct { int ckpt; ft_ckpt_keep keep; } runs[] = {
        { 0, FT_CKPT_KEEP_NOTHING }, { 1, FT_CKPT_KEEP_NOTHING }, { 2, FT_CKPT_KEEP_NOTHING },
        { 3, FT_CKPT_KEEP_NOTHING }, { 1, FT_CKPT_KEEP_ATTENTION },
        { 3, FT_CKPT_KEEP_ATTENTION }, { 1, FT_CKPT_KEEP_ATTENTION_OUTPUT },
        { 3, FT_CKPT_KEEP_ATTENTION_OUTPUT },
    };
    enum { RUNS = sizeof runs / sizeof runs[0] };
    for (int f = 0; f < 4; f++) {
        ft_model_config c = test_tiny_config();
        int skipped = 1; /* forward GEMMs per block the recompute leaves out */
        if (f == 1) {
            c.family = FT_FAMILY_QWEN3;
            c.head_dim = 12;
        } else if (f >= 2) { /* GPT-NeoX, parallel residual; GPT-J, one shared norm */
            c.family = f == 2 ? FT_FAMILY_GPT_NEOX : FT_FAMILY_GPTJ;
            c.num_key_value_heads = c.num_attention_heads;
            c.rotary_dim = 4;
            c.parallel_residual = f == 2;
            c.attention_bias = f == 2;
            c.gelu_tanh = f == 3;
            skipped = 2;
        }
        const int fwd_gemms = f >= 2 ? 6 : 7; /* q k v o (gate) up down */
        c.num_hidden_layers = 3;
        rig r;
        rig_up(&r, c, FT_DTYPE_F32);
        ft_backend_ops counting = *r.be->ops;
        counting.matmul = counting_all_matmul;
        counting.matmul_add = counting_all_matmul_add;
        counting.attention_fwd = counting_attention_fwd;
        counting.swiglu_fwd = counting_swiglu_fwd;
        counted_ops = r.be->ops;
        r.be->ops = &counting;
        rows x;
        random_rows(&x, 3, 16, 37, 9, 1);
        float **g[RUNS];
        long gemms[RUNS], attends[RUNS], swiglus[RUNS];
        for (int i = 0; i < RUNS; i++) {
            ft_model *m = make_model_opts(&r, 3, 16, runs[i].ckpt, runs[i].keep, 8, 5);
            ft_engine_zero_grads(r.engine);
            matmul_calls = attention_calls = swiglu_calls = 0;
            grads_of(&r, m, &x, 1);
            gemms[i] = matmul_calls;
            attends[i] = attention_calls;
            swiglus[i] = swiglu_calls;
            g[i] = snapshot_grads(&r);
            ft_model_free(m);
        }
        for (int i = 1; i < RUNS; i++) {
            for (int u = 0; u < r.layout.n_units; u++)
                assert_memory_equal(g[0][u], g[i][u], r.layout.units[u].numel * sizeof(float));
            /* the checkpointed blocks but the last of them, whose forward activations are
             * still there */
            const int ckpt = runs[i].ckpt;
            const ft_ckpt_keep keep = runs[i].keep;
            const int recomputing = (ckpt == 1 ? c.num_hidden_layers : ckpt - 1) - 1;
            const int mlp_in_gemms = f >= 2 ? 1 : 2; /* (gate) up */
            const long want = (long)recomputing * (keep == FT_CKPT_KEEP_ATTENTION
                                                       ? mlp_in_gemms : fwd_gemms - skipped);
            const long want_att = keep != FT_CKPT_KEEP_NOTHING ? 0 : recomputing;
            static const char *const kept[] = { "", ", attention's output kept",
                                                ", attention kept" };
            printf("wiring %d: %ld GEMMs, %ld with %d of %d blocks recomputing%s (recompute "
                   "%ld, want %ld; attention %ld, want %ld)\n", f, gemms[0], gemms[i],
                   recomputing, c.num_hidden_layers, kept[keep],
                   gemms[i] - gemms[0], want, attends[i] - attends[0], want_att);
            assert_int_equal(gemms[i] - gemms[0], want);
            assert_int_equal(attends[i] - attends[0], want_att);
            assert_int_equal(swiglus[i], swiglus[0]); /* the forward's, one a block */
            assert_int_equal(swiglus[0], f >= 2 ? 0 : c.num_hidden_layers);
        }
        for (int i = 0; i < RUNS; i++)
            free_snapshot(&r, g[i]);
        r.be->ops = counted_ops;
        rig_down(&r);
    }
}

static void test_document_masking_equals_separate(void **state)
{
    (void)state;
    rig r;
    rig_up(&r, test_tiny_config(), FT_DTYPE_F32);
    const int T = 19, a = (T + 1) / 2; /* docs at columns [0, a) and [a, T+1) */
    rows packed;
    random_rows(&packed, 1, T, 37, 13, 1);
    ft_model *m = make_model(&r, 1, T, 1);
    ft_engine_zero_grads(r.engine);
    double packed_loss = loss_of(&r, m, &packed);
    grads_of(&r, m, &packed, 1);
    float **gp = snapshot_grads(&r);
    ft_model_free(m);

    /* doc A: columns [0, a) as a row of seq_len a-1; doc B: [a, T+1), seq_len T-a */
    rows docs[2];
    const int starts[2] = { 0, a }, lens[2] = { a, T + 1 - a };
    double separate_loss = 0.0;
    ft_engine_zero_grads(r.engine);
    for (int k = 0; k < 2; k++) {
        rows *d = &docs[k];
        d->B = 1;
        d->T = lens[k] - 1;
        for (int i = 0; i < lens[k]; i++) {
            d->tokens[i] = packed.tokens[starts[k] + i];
            d->mask[i] = i == 0 ? 0 : packed.mask[starts[k] + i];
            d->segment[i] = 0;
        }
        ft_model *md = make_model(&r, 1, d->T, 0);
        separate_loss += loss_of(&r, md, d);
        grads_of(&r, md, d, 0);
        ft_model_free(md);
    }
    float **gs = snapshot_grads(&r);
    printf("packed loss sum %.7f, separate %.7f\n", packed_loss, separate_loss);
    assert_true(fabs(packed_loss - separate_loss) < 1e-5 * fabs(separate_loss));
    for (int u = 0; u < r.layout.n_units; u++)
        for (size_t i = 0; i < r.layout.units[u].numel; i++)
            assert_true(fabs(gp[u][i] - gs[u][i]) <= 1e-5 + 1e-4 * fabs(gs[u][i]));
    free_snapshot(&r, gp);
    free_snapshot(&r, gs);
    rig_down(&r);
}

static void test_bf16_params_are_bf16(void **state)
{
    (void)state;
    rig r;
    rig_up(&r, test_tiny_config(), FT_DTYPE_BF16);
    ft_error err;
    ft_model *m = make_model(&r, 2, 8, 1);
    rows x;
    random_rows(&x, 2, 8, 37, 3, 0);
    ft_engine_zero_grads(r.engine);
    grads_of(&r, m, &x, 0);
    ft_optimizer_config oc = { .type = FT_OPT_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95,
                               .eps = 1e-8, .weight_decay = 0.1 };
    TEST_CHECK_OK(ft_engine_step(r.engine, &oc, oc.lr, 1.0, &err), &err);
    size_t changed = 0;
    for (int u = 0; u < r.layout.n_units; u++) {
        size_t n = r.layout.units[u].numel;
        float *p = malloc(n * sizeof *p);
        TEST_CHECK_OK(ft_engine_download_params(r.engine, u, p, &err), &err);
        for (size_t i = 0; i < n; i++)
            assert_true(ft_bf16_to_f32(ft_f32_to_bf16(p[i])) == p[i]);
        changed += n;
        free(p);
    }
    assert_true(changed > 0);
    ft_model_free(m);
    rig_down(&r);
}

/* The backend's matmul, counting the head's GEMMs (the only ones with vocab-wide
 * operands: V = 37 is none of the tiny model's other widths). */
static const ft_backend_ops *real_ops;
static int head_dw_accumulations; /* dW[V, H] (+)= ...: the GEMMs that write dW */
static float head_dw_first_beta;  /* beta of the first of them */
static long head_logit_rows;      /* rows of logits[rows, V] computed */
static ft_dtype head_logit_type;  /* the storage they were computed in (the last GEMM's) */
static int tiny_vocab;

static void counting_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a,
                            const void *b, int m, int n, int k, bool trans_a, bool trans_b,
                            float alpha, float beta)
{
    if (m == tiny_vocab && trans_a && head_dw_accumulations++ == 0)
        head_dw_first_beta = beta;
    if (n == tiny_vocab && trans_b) {
        head_logit_rows += m;
        head_logit_type = t.c;
    }
    real_ops->matmul(be, t, c, a, b, m, n, k, trans_a, trans_b, alpha, beta);
}

static void test_head_weight_grad_once(void **state)
{
    (void)state;
    for (int recipe = 0; recipe < 2; recipe++) {
        /* bf16: the logits are made in bf16 over their dlogits, chunk by chunk (head.c) */
        const ft_dtype dt = recipe ? FT_DTYPE_BF16 : FT_DTYPE_F32;
        rig r;
        ft_model_config c = test_tiny_config();
        rig_up(&r, c, dt);
        r.model_dt = dt;
        tiny_vocab = c.vocab_size;
        ft_backend_ops counting = *r.be->ops;
        counting.matmul = counting_matmul;
        real_ops = r.be->ops;
        r.be->ops = &counting;

        const int B = 3, T = 20;
        rows x;
        random_rows(&x, B, T, c.vocab_size, 21, 1);
        for (int i = 0; i < 3 * (T + 1); i++) /* a prompt: the first row's first 3/4 */
            x.mask[i] = i < 15 ? 0 : x.mask[i];
        long targets = 0;
        for (int rr = 0; rr < B; rr++)
            for (int t = 1; t <= T; t++)
                targets += x.mask[rr * (T + 1) + t] != 0;

        /* default budget: one group, so one accumulation into dW per micro-batch */
        float **g[2];
        double loss[2];
        const int groups[2] = { 0, 7 }, chunks[2] = { 0, 3 };
        for (int k = 0; k < 2; k++) {
            ft_model *m = make_model_head(&r, B, T, 0, groups[k], chunks[k]);
            ft_engine_zero_grads(r.engine);
            head_dw_accumulations = 0;
            head_logit_rows = 0;
            head_logit_type = FT_DTYPE_F32 + FT_DTYPE_BF16 + 1; /* neither */
            ft_error err;
            ft_param_source src = ft_engine_param_source(r.engine);
            ft_host_batch b = as_batch(&x, 1);
            long nt;
            TEST_CHECK_OK(ft_model_train_micro(m, &src, &b, 1.0f, &loss[k], &nt, &err), &err);
            g[k] = snapshot_grads(&r);
            const int want = k == 0 ? 1 : (int)((targets + groups[k] - 1) / groups[k]);
            printf("%s, group %d: %d accumulations into the head's dW (want %d), %ld logit rows "
                   "for %ld targets\n", recipe ? "bf16" : "fp32", groups[k],
                   head_dw_accumulations, want, head_logit_rows, targets);
            assert_int_equal(nt, targets);
            assert_int_equal(head_dw_accumulations, want);
            /* the engine left dW unset at the reset: the first GEMM writes it, the rest add */
            assert_true(head_dw_first_beta == 0.0f);
            assert_int_equal(head_logit_rows, targets); /* rows without a target: no logits */
            assert_int_equal(head_logit_type, dt);
            ft_model_free(m);
        }
        /* groups and chunks change the summation order only */
        const double tol = 1e-6;
        assert_true(fabs(loss[0] - loss[1]) <= tol * fabs(loss[0]));
        for (int u = 0; u < r.layout.n_units; u++) {
            double diff = 0.0, norm = 0.0;
            for (size_t i = 0; i < r.layout.units[u].numel; i++) {
                diff += (g[0][u][i] - g[1][u][i]) * (double)(g[0][u][i] - g[1][u][i]);
                norm += g[0][u][i] * (double)g[0][u][i];
            }
            printf("unit %d: gradient rel diff %.3e\n", u, sqrt(diff / norm));
            assert_true(sqrt(diff) <= tol * sqrt(norm));
        }
        free_snapshot(&r, g[0]);
        free_snapshot(&r, g[1]);
        r.be->ops = real_ops;
        rig_down(&r);
    }
}

/* A micro-batch without a single target after one with targets, each starting from a
 * reset: the head computes no logits and writes no dW GEMM, so its dW (which the reset
 * left holding the first micro-batch's values, untied or tied to the embedding) must be
 * zeroed by the head itself; every gradient is then exactly zero. */
static void test_no_target_gradients_zero(void **state)
{
    (void)state;
    for (int tied = 0; tied < 2; tied++) {
        rig r;
        ft_model_config c = test_tiny_config();
        c.tie_word_embeddings = tied;
        rig_up(&r, c, FT_DTYPE_F32);
        rows x;
        random_rows(&x, 3, 16, c.vocab_size, 5, 0);
        ft_model *m = make_model(&r, 3, 16, 1);
        ft_engine_zero_grads(r.engine);
        grads_of(&r, m, &x, 0);
        float **before = snapshot_grads(&r);
        double norm = 0.0;
        for (size_t i = 0; i < r.layout.units[0].numel; i++)
            norm += fabs(before[0][i]);
        assert_true(norm > 0.0); /* the first micro-batch wrote the embedding's gradient */
        memset(x.mask, 0, sizeof x.mask);
        ft_engine_zero_grads(r.engine);
        grads_of(&r, m, &x, 0);
        float **g = snapshot_grads(&r);
        for (int u = 0; u < r.layout.n_units; u++)
            for (size_t i = 0; i < r.layout.units[u].numel; i++)
                if (g[u][i] != 0.0f)
                    fail_msg("tied %d: unit %d element %zu: %g, want 0", tied, u, i, g[u][i]);
        free_snapshot(&r, before);
        free_snapshot(&r, g);
        ft_model_free(m);
        rig_down(&r);
    }
}

/* The head's derived rows: a Llama-3 vocabulary's micro-batch of 4096 tokens is one
 * group; logits made in place over the dlogits are one chunk a group; fp32 logits
 * chunks apart (bf16 with an output bias) are an eighth of the budget rounded down to
 * whole GEMM tiles of 128 rows (1.25 GiB: 327 rows -> 256; 2.2 GiB: 571 -> 512), left
 * as they are below a tile or at the micro-batch; rows set by the caller are kept. */
static void test_head_rows_from_budget(void **state)
{
    (void)state;
    const size_t MiB = (size_t)1 << 20;
    struct {
        size_t V, budget, tokens, dlogit_bytes;
        bool fp32_chunks;
        int group, chunk;
    } cases[] = {
        { 128256, 1280 * MiB, 4096, 2, false, 4096, 4096 },
        { 128256, 256 * MiB, 4096, 2, false, 2048, 2048 }, /* the group's floor */
        { 256000, 1280 * MiB, 4096, 2, false, 2621, 2621 },
        { 128256, 1280 * MiB, 4096, 2, true, 4096, 256 },
        { 128256, 2253 * MiB, 4096, 2, true, 4096, 512 },
        { 128256, 256 * MiB, 4096, 2, true, 2048, 65 },  /* below a tile: the budget's rows */
        { 128256, 2253 * MiB, 300, 2, true, 300, 300 },  /* the micro-batch is one chunk */
        { 128256, 1280 * MiB, 4096, 4, false, 2616, 2616 }, /* fp32 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_model_options o = { .head_budget_bytes = cases[i].budget };
        ft_model_resolve_head_rows(&o, cases[i].V, cases[i].tokens, cases[i].dlogit_bytes,
                                   cases[i].fp32_chunks);
        if (o.head_group_rows != cases[i].group || o.head_chunk_rows != cases[i].chunk)
            fail_msg("case %zu: group %d chunk %d, want %d and %d", i, o.head_group_rows,
                     o.head_chunk_rows, cases[i].group, cases[i].chunk);
        if (cases[i].fp32_chunks)
            assert_int_equal(o.head_chunk_rows % FT_HEAD_CHUNK_ALIGN == 0,
                             o.head_chunk_rows >= FT_HEAD_CHUNK_ALIGN &&
                                 o.head_chunk_rows < (int)cases[i].tokens);
    }
    ft_model_options set = { .head_budget_bytes = 1280 * MiB, .head_group_rows = 1000,
                             .head_chunk_rows = 327 };
    ft_model_resolve_head_rows(&set, 128256, 4096, 2, true);
    assert_int_equal(set.head_group_rows, 1000);
    assert_int_equal(set.head_chunk_rows, 327);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_fd),
        cmocka_unit_test(test_checkpointing_identical),
        cmocka_unit_test(test_document_masking_equals_separate),
        cmocka_unit_test(test_bf16_params_are_bf16),
        cmocka_unit_test(test_head_weight_grad_once),
        cmocka_unit_test(test_no_target_gradients_zero),
        cmocka_unit_test(test_head_rows_from_budget),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return rc;
}
