/* Throughput of the CPU attention (forward, backward) and of sgemm, for tuning.
 * Built with `make check` but not run by it:
 *   OMP_NUM_THREADS=2 test/backend/bench_cpu_attention [T] [n_heads] [n_kv] [head_dim]
 * GFLOP/s count the useful causal work, FlashAttention convention:
 *   forward  = 4 * B * n_heads * head_dim * T(T+1)/2  (S = QK^T, O = PV)
 *   backward = 2.5 x forward                           (S, dP, dV, dK, dQ)
 * The CPU backward recomputes S and dP once more (two passes, see
 * cpu_attention.c), so it executes 1.4x the counted flops. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/cpu_internal.h"
#include "backend_test_util.h"
#include "ref_ops.h"

static double now(void)
{
    return omp_get_wtime();
}

static double best_of(int reps, void (*fn)(void *), void *ctx)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(ctx);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

typedef struct attn_bench {
    ft_backend *be;
    ft_attn_shape s;
    float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
} attn_bench;

static void run_fwd(void *p)
{
    attn_bench *a = p;
    a->be->ops->attention_fwd(a->be, FT_DTYPE_F32, a->out, a->lse, a->q, a->k, a->v, NULL, a->s);
}

static void run_bwd(void *p)
{
    attn_bench *a = p;
    a->be->ops->attention_bwd(a->be, FT_DTYPE_F32, a->dq, a->dk, a->dv, a->dout, a->out, a->lse, a->q, a->k,
                              a->v, NULL, a->s);
}

typedef struct gemm_bench {
    int n;
    float *a, *b, *c;
} gemm_bench;

static void run_gemm(void *p)
{
    gemm_bench *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a, g->n,
                g->b, g->n, 0.0f, g->c, g->n);
}

int main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 1024;
    int nh = argc > 2 ? atoi(argv[2]) : 8;
    int nkv = argc > 3 ? atoi(argv[3]) : 2;
    int hd = argc > 4 ? atoi(argv[4]) : 64;
    ft_attn_shape s = {1, T, nh, nkv, hd, 0};
    size_t nq = (size_t)T * nh * hd, nkvn = (size_t)T * nkv * hd;
    double fwd_flops = 4.0 * nh * hd * (double)T * (T + 1) / 2.0;
    double bwd_flops = 2.5 * fwd_flops;
    bt_rng r = bt_rng_make(1);
    printf("threads %d, B=1 T=%d n_heads=%d n_kv=%d head_dim=%d\n", omp_get_max_threads(), T, nh,
           nkv, hd);

    static const char *const isas[] = {"generic", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        attn_bench a = {bt_backend_create_isa(isas[i]), s, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        if ((int)ft_cpu_isa_of(a.be) != i) {
            ft_backend_destroy(a.be);
            continue;
        }
        float *host = malloc(nq * sizeof(float));
        bt_fill_uniform(host, nq, &r, -1, 1);
        a.q = bt_upload(a.be, host, nq);
        a.dout = bt_upload(a.be, host, nq);
        bt_fill_uniform(host, nkvn, &r, -1, 1);
        a.k = bt_upload(a.be, host, nkvn);
        a.v = bt_upload(a.be, host, nkvn);
        free(host);
        a.out = bt_upload(a.be, NULL, nq), a.dq = bt_upload(a.be, NULL, nq);
        a.lse = bt_upload(a.be, NULL, (size_t)nh * T);
        a.dk = bt_upload(a.be, NULL, nkvn), a.dv = bt_upload(a.be, NULL, nkvn);
        run_fwd(&a);
        double tf = best_of(5, run_fwd, &a), tb = best_of(5, run_bwd, &a);
        printf("flash %-8s fwd %8.2f ms %7.2f GFLOP/s | bwd %8.2f ms %7.2f GFLOP/s | fwd+bwd %7.2f GFLOP/s\n",
               isas[i], tf * 1e3, fwd_flops / tf * 1e-9, tb * 1e3, bwd_flops / tb * 1e-9,
               (fwd_flops + bwd_flops) / (tf + tb) * 1e-9);
        float *bufs[] = {a.q, a.k, a.v, a.out, a.lse, a.dout, a.dq, a.dk, a.dv};
        for (int j = 0; j < 9; j++)
            a.be->ops->free(a.be, bufs[j]);
        ft_backend_destroy(a.be);
    }

    /* The naive double-precision reference of the tests (single thread). */
    double *q = malloc(nq * sizeof(double)), *k = malloc(nkvn * sizeof(double));
    double *v = malloc(nkvn * sizeof(double)), *o = malloc(nq * sizeof(double));
    double *dq = malloc(nq * sizeof(double)), *dk = malloc(nkvn * sizeof(double));
    double *dv = malloc(nkvn * sizeof(double)), *lse = malloc((size_t)nh * T * sizeof(double));
    for (size_t i = 0; i < nq; i++)
        q[i] = bt_rng_uniform(&r, -1, 1);
    for (size_t i = 0; i < nkvn; i++)
        k[i] = bt_rng_uniform(&r, -1, 1), v[i] = bt_rng_uniform(&r, -1, 1);
    double t0 = now();
    ref_attention_fwd(o, lse, q, k, v, NULL, s);
    double t1 = now();
    ref_attention_bwd(dq, dk, dv, o, q, k, v, NULL, s);
    double t2 = now();
    printf("naive    double fwd %8.2f ms %7.2f GFLOP/s | bwd %8.2f ms %7.2f GFLOP/s | fwd+bwd %7.2f GFLOP/s\n",
           (t1 - t0) * 1e3, fwd_flops / (t1 - t0) * 1e-9, (t2 - t1) * 1e3,
           bwd_flops / (t2 - t1) * 1e-9, (fwd_flops + bwd_flops) / (t2 - t0) * 1e-9);
    free(q), free(k), free(v), free(o), free(dq), free(dk), free(dv), free(lse);

    gemm_bench g = {1024, malloc(1024 * 1024 * 4), malloc(1024 * 1024 * 4), malloc(1024 * 1024 * 4)};
    bt_fill_uniform(g.a, 1024 * 1024, &r, -1, 1);
    bt_fill_uniform(g.b, 1024 * 1024, &r, -1, 1);
    run_gemm(&g);
    double tg = best_of(10, run_gemm, &g);
    printf("cblas_sgemm 1024^3: %.2f ms %.1f GFLOP/s\n", tg * 1e3, 2.0 * 1024 * 1024 * 1024 / tg * 1e-9);
    free(g.a), free(g.b), free(g.c);
    return 0;
}
