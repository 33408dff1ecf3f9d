/* bf16 attention through cuDNN (cuda/cuda_attention_cudnn*.c) against the CPU backend's
 * fp32 attention on the same bf16 values, through the backend's vtable: causal, GQA,
 * packed documents (ragged batches: documents of 23, 3 and 90 tokens, one token), sliding
 * windows with and without documents, head dims 8, 24, 64, 80 and 128, forward and
 * backward (the backward from the GPU's own forward, against the CPU backward from the
 * CPU forward).
 *
 * With FTMPI_CUDNN_ATTENTION=force a backend must take every one of those calls to cuDNN
 * (it aborts otherwise); under the CPU execution harness the cuDNN stand-in also counts its
 * executions, so the test knows that the path ran. A second backend in the default mode
 * gets calls cuDNN must decline (documents that are not contiguous runs, documents too
 * uneven for a padded batch, head_dim 256) and
 * must still be right, on the own kernels, without a cuDNN execution. Under the harness,
 * engines cuDNN notes as non-deterministic are used only when allowed (check_determinism).
 *
 * Tolerances. Scores are bf16 products summed in fp32 or wider: lse to 1e-5 relative. The
 * output is rounded to bf16 and P is rounded to bf16 before P V: out to 4e-3 of max|v|
 * plus 1e-2 relative. Gradients: P and dS are rounded to bf16 before their products, the
 * outputs are bf16: 2e-2 of the largest magnitude plus 2e-2 relative.
 *
 * Runs on a GPU with cuDNN or on the CPU execution harness; exit 77 (SKIP) without a
 * device or without cuDNN in the build. */
#include "backend/backend.h"
#include "config.h"
#include "util/bf16.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_CUDA_EMULATION
#include "cudaemu.h"
#endif

#ifdef HAVE_CUDNN
static int failures, checks;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

enum seg_kind { SEG_NONE, SEG_PACKED, SEG_SHORT, SEG_LONG, SEG_ONE_TOKEN, SEG_SCATTERED, SEG_UNEVEN,
                SEG_ROW };
static const char *const seg_name[] = { "none", "docs of 23", "docs of 3", "docs of 90",
                                        "docs of 1", "scattered ids",
                                        "one long doc and 1-token docs", "one doc a row" };

static int32_t segment_of(enum seg_kind kind, size_t i, int seq)
{
    int t = (int)(i % (size_t)seq);
    switch (kind) {
    case SEG_PACKED: return 1000 + t / 23;
    case SEG_SHORT: return t / 3;
    case SEG_LONG: return t / 90;
    case SEG_ONE_TOKEN: return t;
    case SEG_UNEVEN: return t < 150 ? 0 : t;
    case SEG_ROW: return 7 + (int32_t)(i / (size_t)seq);
    default: return (int32_t)((i * 7) % 3);
    }
}

/* worst |got - ref| / (floor + afrac max|ref| + rtol |ref|) */
static double worst_ratio(const float *got, const float *ref, size_t n, double afrac, double rtol,
                          double floor)
{
    double maxref = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        maxref = fabs(ref[i]) > maxref ? fabs(ref[i]) : maxref;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double lim = floor + afrac * maxref + rtol * fabs(ref[i]);
        double r = err != err ? INFINITY : err / lim;
        worst = r > worst ? r : worst;
    }
    return worst;
}

/* a host buffer of n values copied into backend memory (bf16 when `bf16`) */
static void *to_backend(ft_backend *be, const float *x, size_t n, int bf16)
{
    void *p = be->ops->alloc(be, n * (bf16 ? 2 : 4));
    if (bf16) {
        uint16_t *h = malloc(n * 2);
        for (size_t i = 0; i < n; i++)
            h[i] = ft_f32_to_bf16(x[i]);
        be->ops->upload(be, p, h, n * 2);
        free(h);
    } else {
        be->ops->upload(be, p, x, n * 4);
    }
    return p;
}

static float *from_backend(ft_backend *be, const void *p, size_t n, int bf16)
{
    float *h = malloc(n * 4);
    be->ops->sync(be);
    if (bf16) {
        uint16_t *b = malloc(n * 2);
        be->ops->download(be, b, p, n * 2);
        for (size_t i = 0; i < n; i++)
            h[i] = ft_bf16_to_f32(b[i]);
        free(b);
    } else {
        be->ops->download(be, h, p, n * 4);
    }
    return h;
}

static long executions(void)
{
#ifdef FT_CUDA_EMULATION
    return cudaemu_cudnn_executions();
#else
    return -1;
#endif
}

static void report(int ok, const char *what, const char *detail)
{
    checks++;
    failures += !ok;
    printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, detail);
}

/* expect_cudnn: 1 the calls must run on cuDNN, 0 they must not */
static void check_case(ft_backend *cpu, ft_backend *gpu, int expect_cudnn, int batch, int seq,
                       int heads, int kv, int hd, enum seg_kind seg_kind, int window)
{
    ft_attn_shape s = { batch, seq, heads, kv, hd, window };
    size_t tokens = (size_t)batch * seq, nq = tokens * heads * hd, nkv = tokens * kv * hd;
    size_t nl = (size_t)batch * heads * seq;
    float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4), *dout = malloc(nq * 4);
    for (size_t i = 0; i < nq; i++) {
        q[i] = ft_bf16_to_f32(ft_f32_to_bf16(uniform(-2, 2)));
        dout[i] = ft_bf16_to_f32(ft_f32_to_bf16(uniform(-1, 1)));
    }
    for (size_t i = 0; i < nkv; i++) {
        k[i] = ft_bf16_to_f32(ft_f32_to_bf16(uniform(-2, 2)));
        v[i] = ft_bf16_to_f32(ft_f32_to_bf16(uniform(-1, 1)));
    }
    int32_t *seg = seg_kind ? malloc(tokens * 4) : NULL;
    for (size_t i = 0; seg && i < tokens; i++)
        seg[i] = segment_of(seg_kind, i, seq);
    char what[128];
    snprintf(what, sizeof what, "B=%d T=%d H=%d/%d D=%d %s window=%d%s", batch, seq, heads, kv, hd,
             seg_name[seg_kind], window, expect_cudnn ? "" : " (declined: own kernels)");

    /* the reference */
    float *cq = to_backend(cpu, q, nq, 0), *ck = to_backend(cpu, k, nkv, 0);
    float *cv = to_backend(cpu, v, nkv, 0), *cdo = to_backend(cpu, dout, nq, 0);
    float *co = cpu->ops->alloc(cpu, nq * 4), *cl = cpu->ops->alloc(cpu, nl * 4);
    float *cdq = cpu->ops->alloc(cpu, nq * 4), *cdk = cpu->ops->alloc(cpu, nkv * 4);
    float *cdv = cpu->ops->alloc(cpu, nkv * 4);
    int32_t *cs = NULL;
    if (seg) {
        cs = cpu->ops->alloc(cpu, tokens * 4);
        cpu->ops->upload(cpu, cs, seg, tokens * 4);
    }
    cpu->ops->attention_fwd(cpu, FT_DTYPE_F32, co, cl, cq, ck, cv, cs, s);
    cpu->ops->attention_bwd(cpu, FT_DTYPE_F32, cdq, cdk, cdv, cdo, co, cl, cq, ck, cv, cs, s);
    float *ro = from_backend(cpu, co, nq, 0), *rl = from_backend(cpu, cl, nl, 0);
    float *rdq = from_backend(cpu, cdq, nq, 0), *rdk = from_backend(cpu, cdk, nkv, 0);
    float *rdv = from_backend(cpu, cdv, nkv, 0);

    /* the GPU, bf16 storage */
    long before = executions();
    void *gq = to_backend(gpu, q, nq, 1), *gk = to_backend(gpu, k, nkv, 1);
    void *gv = to_backend(gpu, v, nkv, 1), *gdo = to_backend(gpu, dout, nq, 1);
    void *go = gpu->ops->alloc(gpu, nq * 2), *gdq = gpu->ops->alloc(gpu, nq * 2);
    void *gdk = gpu->ops->alloc(gpu, nkv * 2), *gdv = gpu->ops->alloc(gpu, nkv * 2);
    float *gl = gpu->ops->alloc(gpu, nl * 4);
    int32_t *gs = NULL;
    if (seg) {
        gs = gpu->ops->alloc(gpu, tokens * 4);
        gpu->ops->upload(gpu, gs, seg, tokens * 4);
    }
    gpu->ops->attention_fwd(gpu, FT_DTYPE_BF16, go, gl, gq, gk, gv, gs, s);
    gpu->ops->attention_bwd(gpu, FT_DTYPE_BF16, gdq, gdk, gdv, gdo, go, gl, gq, gk, gv, gs, s);
    float *xo = from_backend(gpu, go, nq, 1), *xl = from_backend(gpu, gl, nl, 0);
    float *xdq = from_backend(gpu, gdq, nq, 1), *xdk = from_backend(gpu, gdk, nkv, 1);
    float *xdv = from_backend(gpu, gdv, nkv, 1);
    long ran = executions() - before;

    char detail[160];
    double wo = worst_ratio(xo, ro, nq, 4e-3, 1e-2, 0);
    double wl = worst_ratio(xl, rl, nl, 0, 1e-5, 1e-5);
    snprintf(detail, sizeof detail, "forward: worst out %.2f, lse %.2f of tolerance", wo, wl);
    report(wo <= 1 && wl <= 1, what, detail);
    double floor = 16.0 * 6e-8 * sqrt((double)hd) * 2.0;
    double wq = worst_ratio(xdq, rdq, nq, 2e-2, 2e-2, floor);
    double wk = worst_ratio(xdk, rdk, nkv, 2e-2, 2e-2, floor);
    double wv = worst_ratio(xdv, rdv, nkv, 2e-2, 2e-2, floor);
    snprintf(detail, sizeof detail, "backward: worst dq %.2f, dk %.2f, dv %.2f of tolerance", wq,
             wk, wv);
    report(wq <= 1 && wk <= 1 && wv <= 1, what, detail);
    if (before >= 0) { /* only the harness counts executions (-1 on a GPU) */
        long want = expect_cudnn ? 2 : 0;
        snprintf(detail, sizeof detail, "%ld cuDNN executions, %ld expected", ran, want);
        report(ran == want, what, detail);
    }

    void *g[] = { gq, gk, gv, gdo, go, gdq, gdk, gdv, gl, gs };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        if (g[i])
            gpu->ops->free(gpu, g[i]);
    void *c[] = { cq, ck, cv, cdo, co, cl, cdq, cdk, cdv, cs };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        if (c[i])
            cpu->ops->free(cpu, c[i]);
    void *h[] = { q, k, v, dout, seg, ro, rl, rdq, rdk, rdv, xo, xl, xdq, xdk, xdv };
    for (size_t i = 0; i < sizeof h / sizeof *h; i++)
        free(h[i]);
}

#ifdef FT_CUDA_EMULATION
/* Engines cuDNN notes as non-deterministic (an atomics-based backward gives other bits
 * from run to run, which would break bitwise resume) are skipped unless
 * FTMPI_ATTENTION_NONDETERMINISTIC=1: the stand-in's heuristics rank such an engine first
 * (CUDAEMU_CUDNN_ENGINES) and count the plans built on one. Each case a fresh backend, as
 * the switch is read when a backend first reaches attention. */
static void determinism_case(ft_backend *cpu, const char *engines, const char *allow,
                             int expect_cudnn, int expect_nondeterministic)
{
    ft_backend *gpu = NULL;
    ft_error err;
    ft_error_clear(&err);
    setenv("CUDAEMU_CUDNN_ENGINES", engines, 1);
    setenv("FTMPI_ATTENTION_NONDETERMINISTIC", allow, 1);
    if (ft_backend_cuda_create(&gpu, 0, &err) != 0) {
        fprintf(stderr, "backend: %s\n", err.msg);
        exit(1);
    }
    long before = cudaemu_cudnn_nondeterministic_plans();
    check_case(cpu, gpu, expect_cudnn, 1, 70, 2, 1, 64, SEG_NONE, 0);
    long built = cudaemu_cudnn_nondeterministic_plans() - before;
    char what[160], detail[96];
    snprintf(what, sizeof what, "engines %s, FTMPI_ATTENTION_NONDETERMINISTIC=%s", engines, allow);
    snprintf(detail, sizeof detail, "%ld plans on non-deterministic engines, %s expected", built,
             expect_nondeterministic ? "2 (forward, backward)" : "0");
    report(built == (expect_nondeterministic ? 2 : 0), what, detail);
    ft_backend_destroy(gpu);
}

static void check_determinism(ft_backend *cpu)
{
    determinism_case(cpu, "nondeterministic-first", "0", 1, 0); /* the second engine */
    determinism_case(cpu, "nondeterministic-only", "0", 0, 0);  /* declined: own kernels */
    determinism_case(cpu, "nondeterministic-only", "1", 1, 1);  /* allowed */
    determinism_case(cpu, "nondeterministic-first", "1", 1, 1); /* the heuristics' first */
    unsetenv("CUDAEMU_CUDNN_ENGINES");
    unsetenv("FTMPI_ATTENTION_NONDETERMINISTIC");
}
#endif

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    ft_backend *cpu = NULL, *forced = NULL, *deflt = NULL;
    ft_error err;
    ft_error_clear(&err);
    setenv("FTMPI_CUDNN_ATTENTION", "force", 1);
    if (ft_backend_cpu_create(&cpu, &err) != 0 || ft_backend_cuda_create(&forced, 0, &err) != 0) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return 1;
    }
    /* the mode is read when a backend first reaches attention */
    check_case(cpu, forced, 1, 2, 37, 4, 2, 64, SEG_NONE, 0);
    setenv("FTMPI_CUDNN_ATTENTION", "auto", 1);
    if (ft_backend_cuda_create(&deflt, 0, &err) != 0) {
        fprintf(stderr, "backend: %s\n", err.msg);
        return 1;
    }
    check_case(cpu, forced, 1, 2, 100, 4, 2, 64, SEG_PACKED, 0);
    check_case(cpu, forced, 1, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    check_case(cpu, forced, 1, 1, 200, 2, 1, 64, SEG_SHORT, 0);
    check_case(cpu, forced, 1, 2, 40, 4, 1, 64, SEG_ONE_TOKEN, 0);
    check_case(cpu, forced, 1, 2, 131, 2, 1, 64, SEG_NONE, 20);
    check_case(cpu, forced, 1, 1, 150, 2, 2, 128, SEG_NONE, 1);
    check_case(cpu, forced, 1, 1, 201, 2, 1, 64, SEG_LONG, 100);
    check_case(cpu, forced, 1, 1, 99, 4, 2, 64, SEG_PACKED, 40);
    check_case(cpu, forced, 1, 2, 1, 2, 1, 64, SEG_NONE, 0);
    /* small head dims (test models: a Qwen3 one with 24, the tiny one with 8; 16 is the
     * smallest cuDNN is given, and with documents only multiples of 16) */
    check_case(cpu, forced, 1, 2, 70, 4, 2, 24, SEG_NONE, 0);
    check_case(cpu, forced, 1, 1, 100, 4, 2, 16, SEG_PACKED, 0);
    check_case(cpu, forced, 1, 1, 100, 4, 2, 48, SEG_PACKED, 0);
    /* one document a row goes to the plain causal graph, not a ragged one: head_dim 24,
     * which a ragged graph is not given, is taken (forced: a refusal would abort) */
    check_case(cpu, forced, 1, 2, 70, 4, 2, 24, SEG_ROW, 0);
    check_case(cpu, forced, 1, 2, 100, 4, 2, 64, SEG_ROW, 0);
    /* the same plan again (cached), then one for another document count */
    check_case(cpu, forced, 1, 2, 100, 4, 2, 64, SEG_PACKED, 0);
    /* declined: the own kernels answer, and right */
    check_case(cpu, deflt, 0, 1, 130, 2, 2, 64, SEG_SCATTERED, 0);
    check_case(cpu, deflt, 0, 1, 37, 2, 2, 256, SEG_NONE, 0);
    check_case(cpu, deflt, 0, 1, 100, 4, 2, 8, SEG_PACKED, 0);  /* dQ wrong on an H100 */
    check_case(cpu, deflt, 0, 1, 100, 4, 2, 24, SEG_PACKED, 0); /* dQ wrong on an H100 */
    check_case(cpu, deflt, 0, 1, 200, 2, 1, 64, SEG_UNEVEN, 0);
    check_case(cpu, deflt, 1, 1, 64, 2, 1, 80, SEG_PACKED, 5);
    ft_backend_destroy(deflt);
#ifdef FT_CUDA_EMULATION
    check_determinism(cpu);
#endif
    ft_backend_destroy(forced);
    ft_backend_destroy(cpu);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
#else
int main(void)
{
    printf("SKIP: built without cuDNN\n");
    return 77;
}
#endif
