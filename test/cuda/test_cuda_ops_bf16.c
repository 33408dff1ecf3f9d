/* The CUDA backend's transformer ops with bf16 storage against the CPU backend's bf16
 * ops (test/backend/test_cpu_bf16_ops.c holds those to the fp32 ops), on identical bf16
 * inputs. Each backend rounds every output once from an fp32 computation whose
 * summation order (and contraction into FMAs, which depends on the compiler flags)
 * differs, so two results may sit on either side of a rounding boundary: one bf16 unit
 * in the last place apart, which is up to 2^-7 of the value (8 significant bits).
 * Tolerance: max |gpu - cpu| <= tol * max |cpu| with tol = 2^-7 for every output
 * rounded once; 2 x 2^-7 for attention, whose tensor-core kernels also round the
 * probabilities and dS to bf16 for their GEMMs; exact for the embedding gather, the
 * embedding gradient, rope (the same fp32 operations in the same order) and a bf16
 * bias added into fp32 logits. Layernorm and gelu (GPT-NeoX, GPT-J) as the others. Every
 * attention shape the tensor cores take (head_dim 64, 128, 256, GQA, documents, odd
 * lengths, sliding windows) and the widened path (head_dim 36). Gradients into fp32
 * and into bf16 storage.
 *
 * Exit status: 0 pass, 1 failure, 77 (SKIP) without a CUDA device. */
#include "backend/backend.h"
#include "cuda_test_backends.h"
#include "util/bf16.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_CUDA_EMULATION
#include "cudaemu.h"
#endif

#define UNIT (1.0 / 128.0) /* one bf16 unit in the last place, relative, at worst */

static ft_backend *cpu, *gpu;
static int failures, checks;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float uniform(float lo, float hi)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return lo + (hi - lo) * (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}

/* n random bf16 values in [lo, hi) */
static uint16_t *random_bf16(size_t n, float lo, float hi)
{
    uint16_t *h = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++)
        h[i] = ft_f32_to_bf16(uniform(lo, hi));
    return h;
}

static float *random_f32(size_t n, float lo, float hi)
{
    float *f = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++)
        f[i] = uniform(lo, hi);
    return f;
}

/* The same bytes on both backends. */
typedef struct twin {
    void *c, *g;
    size_t bytes;
} twin;

static twin twin_of(const void *host, size_t bytes)
{
    twin t = { cpu->ops->alloc(cpu, bytes + 4), gpu->ops->alloc(gpu, bytes + 4), bytes };
    cpu->ops->upload(cpu, t.c, host, bytes);
    gpu->ops->upload(gpu, t.g, host, bytes);
    return t;
}

static void twin_free(twin t)
{
    cpu->ops->free(cpu, t.c);
    gpu->ops->free(gpu, t.g);
}

static void report(const char *what, int ok, double err, double scale)
{
    checks++;
    if (!ok)
        failures++;
    printf("%s %s: max error %.3g (of max %.3g)\n", ok ? "ok  " : "FAIL", what, err, scale);
}

/* Compares a twin's contents, stored as bf16 (bf16 = 1) or fp32. */
static void compare(const char *what, twin t, int bf16, double tol)
{
    size_t n = t.bytes / (bf16 ? 2 : 4);
    void *hc = malloc(t.bytes + 4), *hg = malloc(t.bytes + 4);
    gpu->ops->sync(gpu);
    cpu->ops->download(cpu, hc, t.c, t.bytes);
    gpu->ops->download(gpu, hg, t.g, t.bytes);
    double err = 0, scale = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        double a = bf16 ? ft_bf16_to_f32(((uint16_t *)hc)[i]) : ((float *)hc)[i];
        double b = bf16 ? ft_bf16_to_f32(((uint16_t *)hg)[i]) : ((float *)hg)[i];
        if (isnan(a) != isnan(b))
            nan = 1;
        if (fabs(a - b) > err)
            err = fabs(a - b);
        if (fabs(a) > scale)
            scale = fabs(a);
    }
    report(what, !nan && err <= tol * scale, err, scale);
    free(hc);
    free(hg);
}

static void test_matmul(int m, int n, int k, int ta, int tb, float beta)
{
    uint16_t *a = random_bf16((size_t)m * k, -1, 1), *b = random_bf16((size_t)k * n, -1, 1);
    uint16_t *c = random_bf16((size_t)m * n, -1, 1);
    float *c32 = random_f32((size_t)m * n, -1, 1);
    twin A = twin_of(a, (size_t)m * k * 2), B = twin_of(b, (size_t)k * n * 2);
    twin C = twin_of(c, (size_t)m * n * 2), C32 = twin_of(c32, (size_t)m * n * 4);
    ft_gemm_types all16 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_BF16 };
    ft_gemm_types to32 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_F32 };
    cpu->ops->matmul(cpu, all16, C.c, A.c, B.c, m, n, k, ta, tb, 1.0f, beta);
    gpu->ops->matmul(gpu, all16, C.g, A.g, B.g, m, n, k, ta, tb, 1.0f, beta);
    cpu->ops->matmul(cpu, to32, C32.c, A.c, B.c, m, n, k, ta, tb, 1.0f, beta);
    gpu->ops->matmul(gpu, to32, C32.g, A.g, B.g, m, n, k, ta, tb, 1.0f, beta);
    char what[96];
    snprintf(what, sizeof what, "matmul %dx%dx%d ta=%d tb=%d beta=%g -> bf16", m, n, k, ta, tb, beta);
    compare(what, C, 1, UNIT);
    snprintf(what, sizeof what, "matmul %dx%dx%d ta=%d tb=%d beta=%g -> fp32", m, n, k, ta, tb, beta);
    compare(what, C32, 0, 1e-5);
    twin_free(A), twin_free(B), twin_free(C), twin_free(C32);
    free(a), free(b), free(c), free(c32);
}

/* An empty inner dimension: C = beta C, a bf16 C rounded once (no GEMM runs). */
static void test_matmul_empty_k(void)
{
    const int m = 13, n = 7;
    uint16_t *c = random_bf16((size_t)m * n, -2, 2), *ab = random_bf16(8, -1, 1);
    twin C = twin_of(c, (size_t)m * n * 2), AB = twin_of(ab, 16);
    ft_gemm_types all16 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_BF16 };
    cpu->ops->matmul(cpu, all16, C.c, AB.c, AB.c, m, n, 0, 0, 0, 1.0f, 0.37f);
    gpu->ops->matmul(gpu, all16, C.g, AB.g, AB.g, m, n, 0, 0, 0, 1.0f, 0.37f);
    compare("matmul k=0 -> bf16: beta C", C, 1, UNIT);
    twin_free(C), twin_free(AB);
    free(c), free(ab);
}

static void test_rmsnorm(int rows, int dim, ft_dtype gt)
{
    const size_t n = (size_t)rows * dim, gb = gt == FT_DTYPE_BF16 ? 2 : 4;
    uint16_t *x = random_bf16(n, -2, 2), *w = random_bf16(dim, 0.5f, 1.5f);
    uint16_t *dy = random_bf16(n, -1, 1), *dx = random_bf16(n, -1, 1);
    void *dw = gt == FT_DTYPE_BF16 ? (void *)random_bf16(dim, -1, 1) : (void *)random_f32(dim, -1, 1);
    twin X = twin_of(x, n * 2), W = twin_of(w, dim * 2), DY = twin_of(dy, n * 2);
    twin DX = twin_of(dx, n * 2), Y = twin_of(x, n * 2), DW = twin_of(dw, dim * gb);
    float *zeros = calloc(rows, 4);
    twin RS = twin_of(zeros, rows * 4);
    cpu->ops->rmsnorm_fwd(cpu, FT_DTYPE_BF16, Y.c, RS.c, X.c, W.c, rows, dim, 1e-5f);
    gpu->ops->rmsnorm_fwd(gpu, FT_DTYPE_BF16, Y.g, RS.g, X.g, W.g, rows, dim, 1e-5f);
    compare("rmsnorm_fwd y", Y, 1, UNIT);
    compare("rmsnorm_fwd rstd", RS, 0, 1e-5);
    /* the backward from the CPU's rstd on both, so only the backward differs */
    void *rs_host = malloc(rows * 4);
    cpu->ops->download(cpu, rs_host, RS.c, rows * 4);
    gpu->ops->upload(gpu, RS.g, rs_host, rows * 4);
    cpu->ops->rmsnorm_bwd(cpu, FT_DTYPE_BF16, gt, DX.c, DX.c, DW.c, DY.c, X.c, W.c, RS.c, rows,
                          dim);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_BF16, gt, DX.g, DX.g, DW.g, DY.g, X.g, W.g, RS.g, rows,
                          dim);
    compare("rmsnorm_bwd dx (accumulated)", DX, 1, UNIT);
    compare(gt == FT_DTYPE_BF16 ? "rmsnorm_bwd dw (bf16)" : "rmsnorm_bwd dw (fp32)", DW,
            gt == FT_DTYPE_BF16, gt == FT_DTYPE_BF16 ? UNIT : 1e-5);
    twin_free(X), twin_free(W), twin_free(DY), twin_free(DX), twin_free(Y), twin_free(DW);
    twin_free(RS);
    free(x), free(w), free(dy), free(dx), free(dw), free(zeros), free(rs_host);
}

/* The 8-wide path of the elementwise kernels (every buffer 16-byte aligned) and their
 * one-value-at-a-time path (every buffer one bf16 off that alignment) must give the same
 * bits: out_g (n bf16, computed by the 8-wide path) against out_1, the same op's result
 * for elements 1..n-1 written one element into a second buffer. */
static void same_bits_off_alignment(const char *what, const void *out_g, const void *out_1,
                                    size_t n)
{
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2);
    gpu->ops->sync(gpu);
    gpu->ops->download(gpu, a, out_g, n * 2);
    gpu->ops->download(gpu, b, out_1, n * 2);
    size_t differ = 0;
    for (size_t i = 1; i < n; i++)
        differ += a[i] != b[i];
    report(what, differ == 0, (double)differ, (double)(n - 1));
    free(a);
    free(b);
}

static void same_bits(const char *what, ft_backend *be, const void *x, const void *y,
                      size_t bytes);

/* swiglu_bwd with out over dout's buffer (a recompute that skipped the forward): out is
 * the bits swiglu_fwd gave in O, dgate and dup those of the call without out (DG, DU). */
static void test_swiglu_bwd_out(twin G, twin U, twin O, twin DG, twin DU, const uint16_t *d,
                                const uint16_t *g, size_t n)
{
    twin D2 = twin_of(d, n * 2), DG2 = twin_of(g, n * 2), DU2 = twin_of(g, n * 2);
    ft_backend *bes[2] = { cpu, gpu };
    for (int i = 0; i < 2; i++) {
        ft_backend *be = bes[i];
        void *d2 = i ? D2.g : D2.c;
        be->ops->swiglu_bwd(be, FT_DTYPE_BF16, i ? DG2.g : DG2.c, i ? DU2.g : DU2.c, d2,
                            i ? G.g : G.c, i ? U.g : U.c, n, d2);
        same_bits("swiglu_bwd out (over dout) == swiglu_fwd", be, d2, i ? O.g : O.c, n * 2);
        same_bits("swiglu_bwd with out: dgate unchanged", be, i ? DG2.g : DG2.c,
                  i ? DG.g : DG.c, n * 2);
        same_bits("swiglu_bwd with out: dup unchanged", be, i ? DU2.g : DU2.c, i ? DU.g : DU.c,
                  n * 2);
    }
    twin_free(D2), twin_free(DG2), twin_free(DU2);
}

static void test_elementwise(void)
{
    const int rows = 37, dim = 96, heads = 3, hd = 32;
    const size_t n = (size_t)rows * dim;
    uint16_t *g = random_bf16(n, -3, 3), *u = random_bf16(n, -2, 2), *d = random_bf16(n, -1, 1);
    uint16_t *b = random_bf16(dim, -1, 1);
    twin G = twin_of(g, n * 2), U = twin_of(u, n * 2), D = twin_of(d, n * 2), O = twin_of(g, n * 2);
    twin DG = twin_of(g, n * 2), DU = twin_of(u, n * 2), B = twin_of(b, dim * 2);
    cpu->ops->swiglu_fwd(cpu, FT_DTYPE_BF16, O.c, G.c, U.c, n);
    gpu->ops->swiglu_fwd(gpu, FT_DTYPE_BF16, O.g, G.g, U.g, n);
    compare("swiglu_fwd", O, 1, UNIT);
    uint16_t *o1 = gpu->ops->alloc(gpu, n * 2), *dg1 = gpu->ops->alloc(gpu, n * 2);
    uint16_t *du1 = gpu->ops->alloc(gpu, n * 2);
    gpu->ops->swiglu_fwd(gpu, FT_DTYPE_BF16, o1 + 1, (uint16_t *)G.g + 1, (uint16_t *)U.g + 1,
                         n - 1);
    same_bits_off_alignment("swiglu_fwd: 8-wide path == one at a time (bits differing)", O.g,
                            o1, n);
    cpu->ops->swiglu_bwd(cpu, FT_DTYPE_BF16, DG.c, DU.c, D.c, G.c, U.c, n, NULL);
    gpu->ops->swiglu_bwd(gpu, FT_DTYPE_BF16, DG.g, DU.g, D.g, G.g, U.g, n, NULL);
    compare("swiglu_bwd dgate", DG, 1, UNIT);
    compare("swiglu_bwd dup", DU, 1, UNIT);
    test_swiglu_bwd_out(G, U, O, DG, DU, d, g, n);
    gpu->ops->swiglu_bwd(gpu, FT_DTYPE_BF16, dg1 + 1, du1 + 1, (uint16_t *)D.g + 1,
                         (uint16_t *)G.g + 1, (uint16_t *)U.g + 1, n - 1, NULL);
    same_bits_off_alignment("swiglu_bwd dgate: 8-wide path == one at a time", DG.g, dg1, n);
    same_bits_off_alignment("swiglu_bwd dup: 8-wide path == one at a time", DU.g, du1, n);
    gpu->ops->free(gpu, o1), gpu->ops->free(gpu, dg1), gpu->ops->free(gpu, du1);
    cpu->ops->bias_add(cpu, FT_DTYPE_BF16, FT_DTYPE_BF16, U.c, B.c, rows, dim);
    gpu->ops->bias_add(gpu, FT_DTYPE_BF16, FT_DTYPE_BF16, U.g, B.g, rows, dim);
    compare("bias_add", U, 1, UNIT);
    { /* an fp32 bias into bf16 activations (the storage pairs are independent) */
        float *b32 = random_f32(dim, -1, 1);
        twin B32 = twin_of(b32, dim * 4u);
        cpu->ops->bias_add(cpu, FT_DTYPE_F32, FT_DTYPE_BF16, U.c, B32.c, rows, dim);
        gpu->ops->bias_add(gpu, FT_DTYPE_F32, FT_DTYPE_BF16, U.g, B32.g, rows, dim);
        compare("bias_add, fp32 bias into bf16", U, 1, UNIT);
        twin_free(B32);
        free(b32);
    }
    for (int gbf = 0; gbf < 2; gbf++) {
        void *db = gbf ? (void *)random_bf16(dim, -1, 1) : (void *)random_f32(dim, -1, 1);
        twin DB = twin_of(db, dim * (gbf ? 2 : 4));
        ft_dtype gt = gbf ? FT_DTYPE_BF16 : FT_DTYPE_F32;
        cpu->ops->bias_grad(cpu, FT_DTYPE_BF16, gt, DB.c, D.c, rows, dim);
        gpu->ops->bias_grad(gpu, FT_DTYPE_BF16, gt, DB.g, D.g, rows, dim);
        compare(gbf ? "bias_grad (bf16)" : "bias_grad (fp32)", DB, gbf, gbf ? UNIT : 1e-5);
        twin_free(DB);
        free(db);
    }
    /* rope over [rows, heads*hd], forward and inverse */
    float *cs = malloc(64 * hd / 2 * 4), *sn = malloc(64 * hd / 2 * 4);
    int32_t pos[64];
    for (int p = 0; p < 64; p++)
        for (int i = 0; i < hd / 2; i++) {
            double ang = p * pow(10000.0, -2.0 * i / hd);
            cs[p * hd / 2 + i] = (float)cos(ang);
            sn[p * hd / 2 + i] = (float)sin(ang);
        }
    for (int t = 0; t < rows; t++)
        pos[t] = (t * 5) % 64;
    twin CS = twin_of(cs, 64 * hd / 2 * 4), SN = twin_of(sn, 64 * hd / 2 * 4);
    twin POS = twin_of(pos, rows * 4), Q = twin_of(g, (size_t)rows * heads * hd * 2);
    for (int inv = 0; inv < 2; inv++) {
        cpu->ops->rope(cpu, FT_DTYPE_BF16, Q.c, CS.c, SN.c, POS.c, rows, heads,
                       (ft_rope_shape){ hd, hd, false }, inv);
        gpu->ops->rope(gpu, FT_DTYPE_BF16, Q.g, CS.g, SN.g, POS.g, rows, heads,
                       (ft_rope_shape){ hd, hd, false }, inv);
        compare(inv ? "rope inverse" : "rope", Q, 1, 0); /* the same fp32 ops: bit-identical */
    }
    twin_free(CS), twin_free(SN), twin_free(POS), twin_free(Q);
    twin_free(G), twin_free(U), twin_free(D), twin_free(O), twin_free(DG), twin_free(DU);
    twin_free(B);
    free(g), free(u), free(d), free(b), free(cs), free(sn);
}

static void test_layernorm(int rows, int dim, ft_dtype gt)
{
    const size_t n = (size_t)rows * dim, gb = gt == FT_DTYPE_BF16 ? 2 : 4;
    uint16_t *x = random_bf16(n, -2, 2), *w = random_bf16(dim, 0.5f, 1.5f);
    uint16_t *b = random_bf16(dim, -0.5f, 0.5f);
    uint16_t *dy = random_bf16(n, -1, 1), *dx = random_bf16(n, -1, 1);
    void *dw = gt == FT_DTYPE_BF16 ? (void *)random_bf16(dim, -1, 1) : (void *)random_f32(dim, -1, 1);
    void *db = gt == FT_DTYPE_BF16 ? (void *)random_bf16(dim, -1, 1) : (void *)random_f32(dim, -1, 1);
    twin X = twin_of(x, n * 2), W = twin_of(w, dim * 2), B = twin_of(b, dim * 2);
    twin DY = twin_of(dy, n * 2), DX = twin_of(dx, n * 2), Y = twin_of(x, n * 2);
    twin DW = twin_of(dw, dim * gb), DB = twin_of(db, dim * gb);
    float *zeros = calloc(rows, 4);
    twin MU = twin_of(zeros, rows * 4), RS = twin_of(zeros, rows * 4);
    cpu->ops->layernorm_fwd(cpu, FT_DTYPE_BF16, Y.c, MU.c, RS.c, X.c, W.c, B.c, rows, dim, 1e-5f);
    gpu->ops->layernorm_fwd(gpu, FT_DTYPE_BF16, Y.g, MU.g, RS.g, X.g, W.g, B.g, rows, dim, 1e-5f);
    compare("layernorm_fwd y", Y, 1, UNIT);
    compare("layernorm_fwd mean", MU, 0, 1e-5);
    compare("layernorm_fwd rstd", RS, 0, 1e-5);
    /* the backward from the CPU's statistics on both, so only the backward differs */
    void *stat = malloc(rows * 4);
    cpu->ops->download(cpu, stat, MU.c, rows * 4);
    gpu->ops->upload(gpu, MU.g, stat, rows * 4);
    cpu->ops->download(cpu, stat, RS.c, rows * 4);
    gpu->ops->upload(gpu, RS.g, stat, rows * 4);
    cpu->ops->layernorm_bwd(cpu, FT_DTYPE_BF16, gt, DX.c, DX.c, DW.c, DB.c, DY.c, X.c, W.c, MU.c,
                            RS.c, rows, dim);
    gpu->ops->layernorm_bwd(gpu, FT_DTYPE_BF16, gt, DX.g, DX.g, DW.g, DB.g, DY.g, X.g, W.g, MU.g,
                            RS.g, rows, dim);
    compare("layernorm_bwd dx (accumulated)", DX, 1, UNIT);
    int g16 = gt == FT_DTYPE_BF16;
    compare(g16 ? "layernorm_bwd dw (bf16)" : "layernorm_bwd dw (fp32)", DW, g16, g16 ? UNIT : 1e-5);
    compare(g16 ? "layernorm_bwd db (bf16)" : "layernorm_bwd db (fp32)", DB, g16, g16 ? UNIT : 1e-5);
    twin_free(X), twin_free(W), twin_free(B), twin_free(DY), twin_free(DX), twin_free(Y);
    twin_free(DW), twin_free(DB), twin_free(MU), twin_free(RS);
    free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(zeros), free(stat);
}

/* GELU both kinds; bias_add of a bf16 bias into fp32 logits (GPT-J's lm_head, exact:
 * one fp32 add on both); rope with GPT-NeoX's partial and GPT-J's interleaved pairs. */
static void test_neox_gptj_elementwise(void)
{
    const size_t n = 4099;
    uint16_t *x = random_bf16(n, -5, 5), *d = random_bf16(n, -1, 1);
    twin X = twin_of(x, n * 2), O = twin_of(x, n * 2), D = twin_of(d, n * 2);
    for (int kind = FT_GELU_ERF; kind <= FT_GELU_TANH; kind++) {
        twin DX = twin_of(d, n * 2);
        cpu->ops->gelu_fwd(cpu, FT_DTYPE_BF16, (ft_gelu_kind)kind, O.c, X.c, n);
        gpu->ops->gelu_fwd(gpu, FT_DTYPE_BF16, (ft_gelu_kind)kind, O.g, X.g, n);
        compare(kind ? "gelu_fwd tanh" : "gelu_fwd erf", O, 1, UNIT);
        cpu->ops->gelu_bwd(cpu, FT_DTYPE_BF16, (ft_gelu_kind)kind, DX.c, D.c, X.c, n);
        gpu->ops->gelu_bwd(gpu, FT_DTYPE_BF16, (ft_gelu_kind)kind, DX.g, DX.g, X.g, n); /* in place */
        compare(kind ? "gelu_bwd tanh" : "gelu_bwd erf", DX, 1, UNIT);
        twin_free(DX);
    }
    twin_free(X), twin_free(O), twin_free(D);
    free(x), free(d);

    const int rows = 9, vocab = 301;
    float *logits = random_f32((size_t)rows * vocab, -8, 8);
    uint16_t *bias = random_bf16(vocab, -1, 1);
    twin L = twin_of(logits, (size_t)rows * vocab * 4), BI = twin_of(bias, vocab * 2);
    cpu->ops->bias_add(cpu, FT_DTYPE_BF16, FT_DTYPE_F32, L.c, BI.c, rows, vocab);
    gpu->ops->bias_add(gpu, FT_DTYPE_BF16, FT_DTYPE_F32, L.g, BI.g, rows, vocab);
    compare("bias_add bf16 bias into fp32 logits (exact)", L, 0, 0);
    twin_free(L), twin_free(BI);
    free(logits), free(bias);

    const int tokens = 17, heads = 3, hd = 40, rot = 10, max_pos = 64;
    float *cs = malloc(max_pos * rot / 2 * 4), *sn = malloc(max_pos * rot / 2 * 4);
    int32_t pos[17];
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < rot / 2; i++) {
            double ang = p * pow(10000.0, -2.0 * i / rot);
            cs[p * rot / 2 + i] = (float)cos(ang);
            sn[p * rot / 2 + i] = (float)sin(ang);
        }
    for (int t = 0; t < tokens; t++)
        pos[t] = (t * 13) % max_pos;
    uint16_t *q = random_bf16((size_t)tokens * heads * hd, -2, 2);
    twin CS = twin_of(cs, max_pos * rot / 2 * 4), SN = twin_of(sn, max_pos * rot / 2 * 4);
    twin POS = twin_of(pos, tokens * 4);
    for (int il = 0; il < 2; il++) {
        const ft_rope_shape shape = { hd, rot, il == 1 };
        twin Q = twin_of(q, (size_t)tokens * heads * hd * 2);
        for (int inv = 0; inv < 2; inv++) {
            cpu->ops->rope(cpu, FT_DTYPE_BF16, Q.c, CS.c, SN.c, POS.c, tokens, heads, shape, inv);
            gpu->ops->rope(gpu, FT_DTYPE_BF16, Q.g, CS.g, SN.g, POS.g, tokens, heads, shape, inv);
            compare(il ? "rope interleaved rot_dim < head_dim" : "rope partial rot_dim < head_dim",
                    Q, 1, 0); /* the same fp32 ops: bit-identical */
        }
        twin_free(Q);
    }
    twin_free(CS), twin_free(SN), twin_free(POS);
    free(cs), free(sn), free(q);
}

static void test_embedding(int vocab, int dim, int tokens)
{
    uint16_t *table = random_bf16((size_t)vocab * dim, -1, 1);
    uint16_t *dout = random_bf16((size_t)tokens * dim, -1, 1);
    int32_t *ids = malloc(tokens * 4);
    for (int t = 0; t < tokens; t++)
        ids[t] = (int32_t)(uniform(0, 1) * (vocab / 3)) * 3 % vocab; /* repeats */
    twin T = twin_of(table, (size_t)vocab * dim * 2), DO = twin_of(dout, (size_t)tokens * dim * 2);
    twin IDS = twin_of(ids, tokens * 4), O = twin_of(dout, (size_t)tokens * dim * 2);
    cpu->ops->embedding_fwd(cpu, FT_DTYPE_BF16, O.c, T.c, IDS.c, tokens, dim);
    gpu->ops->embedding_fwd(gpu, FT_DTYPE_BF16, O.g, T.g, IDS.g, tokens, dim);
    compare("embedding_fwd (a gather: exact)", O, 1, 0);
    for (int gbf = 0; gbf < 2; gbf++) {
        size_t n = (size_t)vocab * dim;
        void *dt = gbf ? (void *)random_bf16(n, -1, 1) : (void *)random_f32(n, -1, 1);
        twin DT = twin_of(dt, n * (gbf ? 2 : 4));
        ft_dtype gt = gbf ? FT_DTYPE_BF16 : FT_DTYPE_F32;
        cpu->ops->embedding_bwd(cpu, FT_DTYPE_BF16, gt, DT.c, DO.c, IDS.c, tokens, dim);
        gpu->ops->embedding_bwd(gpu, FT_DTYPE_BF16, gt, DT.g, DO.g, IDS.g, tokens, dim);
        /* the same per-row fp32 sums in token order on both: bit-identical */
        compare(gbf ? "embedding_bwd (bf16)" : "embedding_bwd (fp32)", DT, gbf, 0);
        twin_free(DT);
        free(dt);
    }
    twin_free(T), twin_free(DO), twin_free(IDS), twin_free(O);
    free(table), free(dout), free(ids);
}

static void test_attention(int batch, int seq, int heads, int kv, int hd, int window, int docs)
{
    ft_attn_shape s = { batch, seq, heads, kv, hd, window };
    const size_t tok = (size_t)batch * seq, nq = tok * heads * hd, nkv = tok * kv * hd;
    uint16_t *q = random_bf16(nq, -1, 1), *k = random_bf16(nkv, -1, 1), *v = random_bf16(nkv, -1, 1);
    uint16_t *dout = random_bf16(nq, -1, 1);
    int32_t *seg = malloc(tok * 4);
    for (size_t i = 0; i < tok; i++)
        seg[i] = (int32_t)((i % seq) * docs / seq);
    float *zl = calloc(tok * heads, 4);
    twin Q = twin_of(q, nq * 2), K = twin_of(k, nkv * 2), V = twin_of(v, nkv * 2);
    twin DO = twin_of(dout, nq * 2), SEG = twin_of(seg, tok * 4), O = twin_of(q, nq * 2);
    twin L = twin_of(zl, tok * heads * 4);
    twin DQ = twin_of(q, nq * 2), DK = twin_of(k, nkv * 2), DV = twin_of(v, nkv * 2);
    const int32_t *sc = docs > 1 ? SEG.c : NULL, *sg = docs > 1 ? SEG.g : NULL;
    cpu->ops->attention_fwd(cpu, FT_DTYPE_BF16, O.c, L.c, Q.c, K.c, V.c, sc, s);
    gpu->ops->attention_fwd(gpu, FT_DTYPE_BF16, O.g, L.g, Q.g, K.g, V.g, sg, s);
    char what[120];
    snprintf(what, sizeof what, "attention B=%d T=%d heads %d/%d hd=%d window=%d docs=%d", batch,
             seq, heads, kv, hd, window, docs);
    char w2[160];
    snprintf(w2, sizeof w2, "%s out", what);
    compare(w2, O, 1, 2 * UNIT);
    snprintf(w2, sizeof w2, "%s lse", what);
    compare(w2, L, 0, 1e-5);
    /* backward of the CPU's forward on both (out and lse as the CPU computed them) */
    void *oh = malloc(nq * 2), *lh = malloc(tok * heads * 4);
    cpu->ops->download(cpu, oh, O.c, nq * 2);
    cpu->ops->download(cpu, lh, L.c, tok * heads * 4);
    gpu->ops->upload(gpu, O.g, oh, nq * 2);
    gpu->ops->upload(gpu, L.g, lh, tok * heads * 4);
    cpu->ops->attention_bwd(cpu, FT_DTYPE_BF16, DQ.c, DK.c, DV.c, DO.c, O.c, L.c, Q.c, K.c, V.c, sc, s);
    gpu->ops->attention_bwd(gpu, FT_DTYPE_BF16, DQ.g, DK.g, DV.g, DO.g, O.g, L.g, Q.g, K.g, V.g, sg, s);
    snprintf(w2, sizeof w2, "%s dq", what);
    compare(w2, DQ, 1, 2 * UNIT);
    snprintf(w2, sizeof w2, "%s dk", what);
    compare(w2, DK, 1, 2 * UNIT);
    snprintf(w2, sizeof w2, "%s dv", what);
    compare(w2, DV, 1, 2 * UNIT);
    twin_free(Q), twin_free(K), twin_free(V), twin_free(DO), twin_free(SEG), twin_free(O);
    twin_free(L), twin_free(DQ), twin_free(DK), twin_free(DV);
    free(q), free(k), free(v), free(dout), free(seg), free(zl), free(oh), free(lh);
}

static void test_decode(void)
{
    const int past = 29, n_new = 3, heads = 4, kv = 2, hd = 64, len = past + n_new;
    uint16_t *q = random_bf16((size_t)n_new * heads * hd, -1, 1);
    uint16_t *k = random_bf16((size_t)len * kv * hd, -1, 1), *v = random_bf16((size_t)len * kv * hd, -1, 1);
    twin Q = twin_of(q, (size_t)n_new * heads * hd * 2), O = twin_of(q, (size_t)n_new * heads * hd * 2);
    twin K = twin_of(k, (size_t)len * kv * hd * 2), V = twin_of(v, (size_t)len * kv * hd * 2);
    cpu->ops->attention_decode(cpu, FT_DTYPE_BF16, O.c, Q.c, K.c, V.c, past, n_new, heads, kv, hd, 0);
    gpu->ops->attention_decode(gpu, FT_DTYPE_BF16, O.g, Q.g, K.g, V.g, past, n_new, heads, kv, hd, 0);
    compare("attention_decode", O, 1, UNIT);
    twin_free(Q), twin_free(O), twin_free(K), twin_free(V);
    free(q), free(k), free(v);
}

/* ---- the residual forms (backend.h: matmul_add, the norms' dx_base) ----
 * Each form must give, on each backend, the bits of the copy-and-accumulate it replaces
 * (the same kernel reads another buffer), and the GPU's result must match the CPU's as
 * everywhere else. Buffers sit `off` bf16 past a 16-byte boundary: 0 takes the 8-wide
 * path of the norms' kernels, 1 the one-value-at-a-time path. */

/* `bytes` of backend memory at `off` bf16 into a fresh allocation, filled from host */
static void *placed(ft_backend *be, void **base, const void *host, size_t bytes, int off)
{
    *base = be->ops->alloc(be, bytes + 32);
    void *p = (char *)*base + 2 * off;
    if (host)
        be->ops->upload(be, p, host, bytes);
    return p;
}

static void same_bits(const char *what, ft_backend *be, const void *x, const void *y, size_t bytes)
{
    unsigned char *hx = malloc(bytes), *hy = malloc(bytes);
    be->ops->sync(be);
    be->ops->download(be, hx, x, bytes);
    be->ops->download(be, hy, y, bytes);
    checks++;
    int same = memcmp(hx, hy, bytes) == 0;
    failures += !same;
    printf("%s %s (%s)\n", same ? "ok  " : "FAIL", what, be == gpu ? "gpu" : "cpu");
    free(hx), free(hy);
}

static void test_matmul_add(int m, int n, int k)
{
    uint16_t *a = random_bf16((size_t)m * k + 1, -1, 1), *b = random_bf16((size_t)k * n + 1, -1, 1);
    uint16_t *c = random_bf16((size_t)m * n, -2, 2);
    const size_t mn = (size_t)m * n * 2;
    twin A = twin_of(a, (size_t)m * k * 2 + 2), B = twin_of(b, (size_t)k * n * 2 + 2);
    twin C = twin_of(c, mn), D = twin_of(c, mn), E = twin_of(c, mn);
    ft_gemm_types all16 = { FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_BF16 };
    ft_backend *bes[2] = { cpu, gpu };
    for (int i = 0; i < 2; i++) {
        ft_backend *be = bes[i];
        void *c_ = i ? C.g : C.c, *d_ = i ? D.g : D.c, *e_ = i ? E.g : E.c;
        const void *a_ = i ? A.g : A.c, *b_ = i ? B.g : B.c;
        be->ops->zero(be, d_, mn); /* d's old contents must not matter */
        be->ops->matmul_add(be, all16, d_, c_, a_, b_, m, n, k, false, true);
        be->ops->matmul(be, all16, e_, a_, b_, m, n, k, false, true, 1.0f, 1.0f); /* e = c */
        char what[96];
        snprintf(what, sizeof what, "matmul_add %dx%dx%d: the bits of copy + accumulate", m, n, k);
        same_bits(what, be, d_, e_, mn);
    }
    compare("matmul_add d = c + a b^T", D, 1, UNIT);
    /* k = 0: d = c exactly */
    gpu->ops->zero(gpu, D.g, mn);
    gpu->ops->matmul_add(gpu, all16, D.g, C.g, A.g, B.g, m, n, 0, false, true);
    same_bits("matmul_add k=0: d = c", gpu, D.g, C.g, mn);
    twin_free(A), twin_free(B), twin_free(C), twin_free(D), twin_free(E);
    free(a), free(b), free(c);
}

/* ---- matmul_pair (backend.h): two GEMMs of one shape in one call ----
 * Each operand's two matrices sit in one allocation, the second `gap` elements past the
 * first's end (the gap filled with values that must survive), or the same matrix twice
 * (shared: a for a projection pair, b for its weight gradients). The CPU's pair must be
 * bitwise two matmul calls; the GPU's (a strided batch of two, or two launches when the
 * outputs come in the other order) must match the CPU's over the whole buffers, gaps
 * included. */
typedef struct pair_case {
    const char *name;
    int m, n, k, ta, tb;
    ft_dtype c_type;
    float beta;
    int share_a, share_b; /* the operand both products read */
    int reversed;         /* c1 before c0 in memory: no strided batch */
    int no_batch;         /* the harness's cuBLASLt refuses batches: two GEMMs */
} pair_case;

static void test_matmul_pair(pair_case pc)
{
    const int gap = 8;
    const size_t mk = (size_t)pc.m * pc.k, kn = (size_t)pc.k * pc.n, mn = (size_t)pc.m * pc.n;
    const size_t ce = ft_dtype_size(pc.c_type);
    uint16_t *a = random_bf16(2 * mk + gap, -1, 1), *b = random_bf16(2 * kn + gap, -1, 1);
    void *c = pc.c_type == FT_DTYPE_F32 ? (void *)random_f32(2 * mn + gap, -1, 1)
                                         : (void *)random_bf16(2 * mn + gap, -1, 1);
    twin A = twin_of(a, (2 * mk + gap) * 2), B = twin_of(b, (2 * kn + gap) * 2);
    twin C = twin_of(c, (2 * mn + gap) * ce), E = twin_of(c, (2 * mn + gap) * ce);
    const ft_gemm_types t = { FT_DTYPE_BF16, FT_DTYPE_BF16, pc.c_type };
    ft_backend *bes[2] = { cpu, gpu };
    for (int i = 0; i < 2; i++) {
        ft_backend *be = bes[i];
        const char *a0 = i ? A.g : A.c, *b0 = i ? B.g : B.c;
        const char *a1 = pc.share_a ? a0 : a0 + (mk + gap) * 2;
        const char *b1 = pc.share_b ? b0 : b0 + (kn + gap) * 2;
        char *c_lo = i ? C.g : C.c, *c_hi = c_lo + (mn + gap) * ce;
        char *c0 = pc.reversed ? c_hi : c_lo, *c1 = pc.reversed ? c_lo : c_hi;
#ifdef FT_CUDA_EMULATION
        const long ops0 = cudaemu_device_ops();
        if (pc.no_batch)
            setenv("CUDAEMU_LT_NO_BATCH", "1", 1);
#endif
        be->ops->matmul_pair(be, t, c0, c1, a0, a1, b0, b1, pc.m, pc.n, pc.k, pc.ta, pc.tb,
                             1.0f, pc.beta);
#ifdef FT_CUDA_EMULATION
        unsetenv("CUDAEMU_LT_NO_BATCH");
        if (be == gpu) { /* one launch unless the outputs come in the other order */
            const long want = pc.reversed || pc.no_batch ? 2 : 1;
            const long ops = cudaemu_device_ops() - ops0;
            checks++;
            failures += ops != want;
            printf("%s matmul_pair %s: %ld device operations\n", ops == want ? "ok  " : "FAIL",
                   pc.name, ops);
        }
        const int reference_here = 1; /* the stand-in's batches are bitwise its single calls */
#else
        const int reference_here = be == cpu; /* a batched cuBLASLt kernel may round apart */
#endif
        if (reference_here) { /* the reference: two matmuls into E */
            char *e_lo = i ? E.g : E.c, *e_hi = e_lo + (mn + gap) * ce;
            be->ops->matmul(be, t, pc.reversed ? e_hi : e_lo, a0, b0, pc.m, pc.n, pc.k, pc.ta,
                            pc.tb, 1.0f, pc.beta);
            be->ops->matmul(be, t, pc.reversed ? e_lo : e_hi, a1, b1, pc.m, pc.n, pc.k, pc.ta,
                            pc.tb, 1.0f, pc.beta);
            char what[128];
            snprintf(what, sizeof what, "matmul_pair %s: the bits of two matmuls", pc.name);
            same_bits(what, be, i ? C.g : C.c, e_lo, C.bytes);
        }
    }
    char what[128];
    snprintf(what, sizeof what, "matmul_pair %s %dx%dx%d ta=%d tb=%d beta=%g", pc.name, pc.m,
             pc.n, pc.k, pc.ta, pc.tb, pc.beta);
    compare(what, C, pc.c_type == FT_DTYPE_BF16, UNIT);
    twin_free(A), twin_free(B), twin_free(C), twin_free(E);
    free(a), free(b), free(c);
}

/* One backend's norm backward (layernorm when mu is non-NULL) into dx from base. */
static void norm_bwd(ft_backend *be, void *dx, const void *base, void *dw, void *db, const void *dy,
                     const void *x, const void *w, const float *mu, const float *rs, int rows,
                     int dim)
{
    if (mu)
        be->ops->layernorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_F32, dx, base, dw, db, dy, x, w, mu, rs,
                               rows, dim);
    else
        be->ops->rmsnorm_bwd(be, FT_DTYPE_BF16, FT_DTYPE_F32, dx, base, dw, dy, x, w, rs, rows,
                             dim);
}

static void test_norm_base(int layernorm, int rows, int dim, int off)
{
    const size_t n = (size_t)rows * dim, nb = n * 2;
    uint16_t *x = random_bf16(n, -2, 2), *w = random_bf16(dim, 0.5f, 1.5f);
    uint16_t *dy = random_bf16(n, -1, 1), *base = random_bf16(n, -1, 1);
    float *stat = random_f32(2 * (size_t)rows, 0.5f, 1.5f), *zeros = calloc(2 * dim, 4);
    const char *name = layernorm ? "layernorm_bwd" : "rmsnorm_bwd";
    uint16_t *out[2][2]; /* [backend][from base, from NULL] */
    ft_backend *bes[2] = { cpu, gpu };
    for (int i = 0; i < 2; i++) {
        ft_backend *be = bes[i];
        void *m[8];
        void *X = placed(be, &m[0], x, nb, off), *W = placed(be, &m[1], w, dim * 2, off);
        void *DY = placed(be, &m[2], dy, nb, off), *B = placed(be, &m[3], base, nb, off);
        void *DX = placed(be, &m[4], NULL, nb, off), *ACC = placed(be, &m[5], base, nb, off);
        float *ST = placed(be, &m[6], stat, 2 * (size_t)rows * 4, 0);
        float *DWB = placed(be, &m[7], zeros, 2 * (size_t)dim * 4, 0);
        float *mu = layernorm ? ST + rows : NULL;
        char what[128];
        for (int form = 0; form < 2; form++) {
            be->ops->upload(be, DX, dy, nb); /* junk: dx's old contents must not matter */
            norm_bwd(be, DX, form == 0 ? B : NULL, DWB, DWB + dim, DY, X, W, mu, ST, rows, dim);
            out[i][form] = malloc(nb);
            be->ops->sync(be);
            be->ops->download(be, out[i][form], DX, nb);
            if (form == 1) /* the accumulating call from zeros */
                be->ops->zero(be, ACC, nb);
            else
                be->ops->upload(be, ACC, base, nb);
            norm_bwd(be, ACC, ACC, DWB, DWB + dim, DY, X, W, mu, ST, rows, dim);
            snprintf(what, sizeof what, "%s dx_base %s, rows %d dim %d at +%d: the bits of %s",
                     name, form ? "NULL" : "apart", rows, dim, off,
                     form ? "zeroing and accumulating" : "copying and accumulating");
            same_bits(what, be, DX, ACC, nb);
        }
        for (int j = 0; j < 8; j++)
            be->ops->free(be, m[j]);
    }
    for (int form = 0; form < 2; form++) {
        double err = 0, scale = 0;
        for (size_t j = 0; j < n; j++) {
            double c = ft_bf16_to_f32(out[0][form][j]), g = ft_bf16_to_f32(out[1][form][j]);
            err = fmax(err, fabs(c - g));
            scale = fmax(scale, fabs(c));
        }
        char what[96];
        snprintf(what, sizeof what, "%s dx_base %s at +%d, gpu vs cpu", name,
                 form ? "NULL" : "apart", off);
        report(what, err <= UNIT * scale, err, scale);
        free(out[0][form]), free(out[1][form]);
    }
    free(x), free(w), free(dy), free(base), free(stat), free(zeros);
}

/* rope_qk: q and k rotated in one call give, on each backend, the bits of two rope calls,
 * and the GPU's the CPU's (the same fp32 operations in the same order): half-split with
 * both 16-byte aligned (the 8-wide path, one launch), q aligned and k one bf16 off (each
 * on its own path), and GPT-J's interleaved pairs (one-pair path, one launch). */
static void test_rope_qk(void)
{
    const int tokens = 23, qh = 4, kh = 2, hd = 64, maxpos = 40;
    const size_t nq = (size_t)tokens * qh * hd, nk = (size_t)tokens * kh * hd;
    float *cs = random_f32((size_t)maxpos * hd / 2, -1, 1),
          *sn = random_f32((size_t)maxpos * hd / 2, -1, 1);
    int32_t pos[23];
    for (int t = 0; t < tokens; t++)
        pos[t] = (t * 7) % maxpos;
    uint16_t *q = random_bf16(nq, -2, 2), *k = random_bf16(nk, -2, 2);
    static const struct {
        int k_off, interleaved, rot;
        const char *what;
    } cases[] = {
        { 0, 0, 64, "half-split, aligned" },
        { 1, 0, 64, "half-split, k off alignment" },
        { 0, 1, 32, "interleaved, rot_dim 32" },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ft_rope_shape r = { hd, cases[c].rot, cases[c].interleaved != 0 };
        uint16_t *res[2][2]; /* [backend][q, k] after rope_qk */
        ft_backend *bes[2] = { cpu, gpu };
        for (int i = 0; i < 2; i++) {
            ft_backend *be = bes[i];
            void *m[7];
            float *CS = placed(be, &m[0], cs, (size_t)maxpos * hd / 2 * 4, 0);
            float *SN = placed(be, &m[1], sn, (size_t)maxpos * hd / 2 * 4, 0);
            int32_t *POS = placed(be, &m[2], pos, sizeof pos, 0);
            void *Q1 = placed(be, &m[3], q, nq * 2, 0),
                 *K1 = placed(be, &m[4], k, nk * 2, cases[c].k_off);
            void *Q2 = placed(be, &m[5], q, nq * 2, 0),
                 *K2 = placed(be, &m[6], k, nk * 2, cases[c].k_off);
            for (int inv = 0; inv < 2; inv++) {
                be->ops->rope_qk(be, FT_DTYPE_BF16, Q1, qh, K1, kh, CS, SN, POS, tokens, r, inv);
                be->ops->rope(be, FT_DTYPE_BF16, Q2, CS, SN, POS, tokens, qh, r, inv);
                be->ops->rope(be, FT_DTYPE_BF16, K2, CS, SN, POS, tokens, kh, r, inv);
                if (!inv) { /* compare after the forward rotation, then rotate back */
                    char what[96];
                    snprintf(what, sizeof what, "rope_qk %s: the bits of rope(q), rope(k)",
                             cases[c].what);
                    same_bits(what, be, Q1, Q2, nq * 2);
                    same_bits(what, be, K1, K2, nk * 2);
                    res[i][0] = malloc(nq * 2), res[i][1] = malloc(nk * 2);
                    be->ops->download(be, res[i][0], Q1, nq * 2);
                    be->ops->download(be, res[i][1], K1, nk * 2);
                }
            }
            for (int j = 0; j < 7; j++)
                be->ops->free(be, m[j]);
        }
        char what[96];
        snprintf(what, sizeof what, "rope_qk %s: gpu bits = cpu bits", cases[c].what);
        checks++;
        int same = !memcmp(res[0][0], res[1][0], nq * 2) && !memcmp(res[0][1], res[1][1], nk * 2);
        failures += !same;
        printf("%s %s\n", same ? "ok  " : "FAIL", what);
        free(res[0][0]), free(res[0][1]), free(res[1][0]), free(res[1][1]);
    }
    free(cs), free(sn), free(q), free(k);
}

int main(void)
{
    const int rc = cuda_test_backends(&cpu, &gpu);
    if (rc)
        return rc;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            test_matmul(37, 29, 45, ta, tb, 0.0f);
            test_matmul(64, 48, 72, ta, tb, 1.0f);
        }
    test_matmul_empty_k();
    test_matmul_add(70, 96, 40);
    /* K and V (or gate and up) of one input; their weight gradients; an accumulating pair;
     * outputs in the other order (two launches) */
    test_matmul_pair((pair_case){ "projections", 40, 24, 56, 0, 1, FT_DTYPE_BF16, 0.0f, 1, 0, 0, 0 });
    test_matmul_pair((pair_case){ "weight grads", 24, 56, 40, 1, 0, FT_DTYPE_F32, 0.0f, 0, 1, 0, 0 });
    test_matmul_pair((pair_case){ "accumulating", 24, 56, 40, 1, 0, FT_DTYPE_F32, 1.0f, 0, 1, 0, 0 });
    test_matmul_pair((pair_case){ "reversed", 40, 24, 56, 0, 1, FT_DTYPE_BF16, 0.0f, 1, 0, 1, 0 });
    test_matmul_pair((pair_case){ "nothing shared", 33, 17, 20, 0, 0, FT_DTYPE_BF16, 1.0f, 0, 0, 0, 0 });
#ifdef FT_CUDA_EMULATION /* a cuBLASLt without strided batches (a shape no plan holds yet) */
    test_matmul_pair((pair_case){ "no batch in the library", 21, 13, 27, 0, 1, FT_DTYPE_BF16,
                                  0.0f, 1, 0, 0, 1 });
#endif
    test_rope_qk();
    for (int off = 0; off < 2; off++) {
        test_norm_base(0, 33, 96, off);
        test_norm_base(1, 33, 96, off);
    }
    test_rmsnorm(37, 96, FT_DTYPE_F32);
    test_rmsnorm(300, 512, FT_DTYPE_BF16);
    test_elementwise();
    test_layernorm(1, 77, FT_DTYPE_BF16);
    test_layernorm(37, 96, FT_DTYPE_F32);
    test_layernorm(300, 1024, FT_DTYPE_BF16);
    test_layernorm(24, 8192, FT_DTYPE_F32); /* the fused backward, two groups a thread */
    test_neox_gptj_elementwise();
    test_embedding(50, 130, 300);
    test_attention(2, 37, 4, 2, 64, 0, 1);   /* tensor cores, GQA, odd length */
    test_attention(1, 70, 2, 1, 128, 0, 3);  /* tensor cores, three documents */
    test_attention(1, 20, 2, 2, 256, 0, 1);  /* tensor cores, head_dim 256 */
    test_attention(1, 33, 4, 2, 36, 0, 1);   /* widened: head_dim 36 */
    test_attention(1, 45, 2, 2, 64, 7, 2);   /* tensor cores, sliding window, documents */
    test_attention(1, 150, 4, 2, 128, 70, 1); /* tensor cores, window over three key tiles */
    test_decode();
    gpu->ops->sync(gpu);
    checks++;
    if (gpu->bytes_in_use != 0)
        failures++, printf("FAIL %zu bytes leaked on the device\n", gpu->bytes_in_use);
    ft_backend_destroy(gpu);
    ft_backend_destroy(cpu);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
