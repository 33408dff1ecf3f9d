/* The LM head and cross-entropy alone, forward + backward, on the CPU or CUDA backend:
 * time per call, TFLOP/s and the head's transient memory (logits and dlogits
 * buffers), for the one-pass head (default memory budget) or a forced group size
 * (--group-rows 65 --chunk-rows 65 gives the former 65-row chunking, whose weight
 * gradient was read and written once per chunk).
 *
 *   bench/head_bench [--device cpu|cuda] [--tokens N] [--hidden H] [--vocab V]
 *                    [--dtype bf16|fp32] [--group-rows G] [--chunk-rows C] [--reps R]
 *                    [--target-frac F]
 * prints one line: head_ms=... tflops=... transient_mib=... groups=... chunk_rows=...
 *
 * FLOPs: logits = X W^T, dX = dlogits W, dW += dlogits^T X: 3 x 2 N V H over the
 * rows with a target. The model around the head is one tiny block (its cost is not
 * timed: the head is called directly after one micro-batch staged the inputs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "model/model_internal.h"
#include "util/rng.h"

typedef struct units {
    void **params, **grads;
    ft_dtype dt;
} units;

static const void *src_acquire(void *ctx, int u) { return ((units *)ctx)->params[u]; }
static void *src_grads(void *ctx, int u) { return ((units *)ctx)->grads[u]; }
static void src_nop(void *ctx, int u) { (void)ctx, (void)u; }

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *random_unit(ft_backend *be, size_t n, ft_dtype dt, uint64_t seed)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(0.02 * ft_rng_normal(seed, 1, i));
    void *d = be->ops->alloc(be, n * ft_dtype_size(dt));
    if (dt == FT_DTYPE_F32) {
        be->ops->upload(be, d, h, n * sizeof(float));
    } else {
        float *tmp = be->ops->alloc(be, n * sizeof(float));
        be->ops->upload(be, tmp, h, n * sizeof(float));
        be->ops->f32_to_bf16(be, d, tmp, n);
        be->ops->free(be, tmp);
    }
    free(h);
    return d;
}

int main(int argc, char **argv)
{
    const char *device = "cpu";
    int N = 1024, H = 1024, V = 32000, group = 0, chunk = 0, reps = 3;
    double target_frac = 1.0;
    ft_dtype dt = FT_DTYPE_BF16;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--device")) device = v;
        else if (!strcmp(k, "--tokens")) N = atoi(v);
        else if (!strcmp(k, "--hidden")) H = atoi(v);
        else if (!strcmp(k, "--vocab")) V = atoi(v);
        else if (!strcmp(k, "--group-rows")) group = atoi(v);
        else if (!strcmp(k, "--chunk-rows")) chunk = atoi(v);
        else if (!strcmp(k, "--reps")) reps = atoi(v);
        else if (!strcmp(k, "--target-frac")) target_frac = atof(v);
        else if (!strcmp(k, "--dtype")) dt = strcmp(v, "fp32") ? FT_DTYPE_BF16 : FT_DTYPE_F32;
        else {
            fprintf(stderr, "head_bench: unknown option %s\n", k);
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    ft_error err;
    ft_backend *be = NULL;
    if ((!strcmp(device, "cuda") ? ft_backend_cuda_create(&be, 0, &err)
                                 : ft_backend_cpu_create(&be, &err))) {
        fprintf(stderr, "head_bench: %s\n", err.msg);
        return 1;
    }
    ft_model_config c = { .vocab_size = V, .hidden_size = H, .intermediate_size = 64,
                          .num_hidden_layers = 1, .num_attention_heads = H / 64,
                          .num_key_value_heads = H / 64, .head_dim = 64,
                          .max_position_embeddings = N, .rms_norm_eps = 1e-5,
                          .rope_theta = 10000.0, .bos_token_id = -1, .eos_token_id = -1 };
    ft_model_layout lay;
    if (ft_model_layout_build(&lay, &c, &err)) {
        fprintf(stderr, "head_bench: %s\n", err.msg);
        return 1;
    }
    units us = { calloc(lay.n_units, sizeof(void *)), calloc(lay.n_units, sizeof(void *)), dt };
    for (int u = 0; u < lay.n_units; u++) {
        us.params[u] = random_unit(be, lay.units[u].numel, dt, 7 + u);
        us.grads[u] = be->ops->alloc(be, lay.units[u].numel * sizeof(float));
    }
    ft_param_source src = { .ctx = &us, .acquire = src_acquire, .grads = src_grads,
                            .release = src_nop, .grad_done = src_nop,
                            .grad_dtype = FT_DTYPE_F32 };
    const size_t budget = be->memory_total / 64 > ((size_t)64 << 20) ? be->memory_total / 64
                                                                     : (size_t)64 << 20;
    ft_model_options mo = { .max_batch = 1, .seq_len = N, .head_budget_bytes = budget,
                            .head_group_rows = group, .head_chunk_rows = chunk, .dtype = dt };
    ft_model *m;
    if (ft_model_create(&m, &lay, be, &mo, &err)) {
        fprintf(stderr, "head_bench: %s\n", err.msg);
        return 1;
    }
    uint32_t *tok = malloc((size_t)(N + 1) * sizeof *tok);
    uint8_t *mask = malloc((size_t)(N + 1));
    for (int i = 0; i <= N; i++) {
        tok[i] = (uint32_t)(ft_rng_u64(3, 2, (uint64_t)i) % (uint64_t)V);
        mask[i] = i > 0 && (double)i <= target_frac * N;
    }
    ft_host_batch b = { .batch = 1, .seq_len = N, .tokens = tok, .loss_mask = mask };
    double loss;
    long nt;
    if (ft_model_train_micro(m, &src, &b, 1.0f / N, &loss, &nt, &err)) { /* stages the batch */
        fprintf(stderr, "head_bench: %s\n", err.msg);
        return 1;
    }
    const int hu = ft_layout_head_unit(&lay);
    const ft_unit_layout *head = &lay.units[hu];
    ft_head_params p = { .w_out = ft_model_at(m, us.params[hu], ft_unit_slot_offset(head, FT_HEAD_LM)),
                         .w_norm = ft_model_at(m, us.params[hu], ft_unit_slot_offset(head, FT_HEAD_NORM)) };
    ft_head_grads g = { .w_out = (float *)us.grads[hu] + ft_unit_slot_offset(head, FT_HEAD_LM),
                        .w_norm = (float *)us.grads[hu] + ft_unit_slot_offset(head, FT_HEAD_NORM) };
    m->gt = FT_DTYPE_F32;
    m->gsize = sizeof(float);
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* the first call warms up */
        be->ops->sync(be);
        double t0 = now();
        ft_head_forward_backward(m, &p, &g, m->block_in[1], m->dres[0], 1.0f / N, 1);
        be->ops->sync(be);
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    const double flops = 6.0 * (double)nt * V * H;
    /* the group's dlogits (which hold its logits first) and, where there is one (bf16
     * with an output bias), the fp32 logits chunk */
    const double transient = (double)m->opt.head_group_rows * V * ft_dtype_size(dt) +
                             (m->logits ? (double)m->opt.head_chunk_rows * V * 4 : 0.0);
    printf("head_ms=%.3f tflops=%.2f transient_mib=%.1f groups=%ld group_rows=%d chunk_rows=%d "
           "targets=%ld device=%s dtype=%s\n",
           1e3 * best, flops / best / 1e12, transient / 1048576.0,
           (nt + m->opt.head_group_rows - 1) / m->opt.head_group_rows, m->opt.head_group_rows,
           m->opt.head_chunk_rows, nt, device, ft_dtype_name(dt));
    ft_model_free(m);
    for (int u = 0; u < lay.n_units; u++) {
        be->ops->free(be, us.params[u]);
        be->ops->free(be, us.grads[u]);
    }
    free(us.params), free(us.grads), free(tok), free(mask);
    ft_model_layout_free(&lay);
    ft_backend_destroy(be);
    MPI_Finalize();
    return 0;
}
