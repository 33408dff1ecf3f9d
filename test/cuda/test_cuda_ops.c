/* CUDA backend vs CPU backend, op by op, on random inputs.
 *
 * Every op of the vtable runs on both backends from the same inputs; outputs
 * are compared element-wise with |gpu - cpu| <= atol + rtol * |cpu|, where
 * rtol is 1e-5 for element-wise ops and 1e-4 for reductions, matmul and
 * attention, and atol is rtol times the largest |cpu| value of the output (a
 * norm-relative floor, so that cancellations near zero are not flagged). Ops
 * that are specified to be bit-exact on both backends (casts, embedding
 * backward, optimiser steps, rope, add/scale) are also checked bitwise, and
 * the ops that reduce (attention backward, rmsnorm and layernorm backward,
 * embedding backward, sum_squares) are run twice on the GPU and must give
 * identical bits.
 *
 * Exit status: 0 pass, 1 failure, 77 (automake SKIP) without a CUDA device.
 * FT_CUDA_TEST_DEVICE selects the device (default 0). */
#include "backend/backend.h"
#include "util/bf16.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_CUDA_EMULATION
#include "cudaemu.h"
#endif

static ft_backend *cpu, *gpu;
static int failures;
static int checks;

/* ---------------------------------------------------------------- utilities */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rng_uniform(float lo, float hi)
{
    return lo + (hi - lo) * ((float)(rng_u32() & 0xffffff) / 16777216.0f);
}

static float *host_random(size_t n, float lo, float hi)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        h[i] = rng_uniform(lo, hi);
    return h;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

/* A buffer on the backend holding a copy of host data. */
static void *be_dup(ft_backend *be, const void *h, size_t bytes)
{
    void *d = be->ops->alloc(be, bytes);
    if (!d) {
        fprintf(stderr, "%s: alloc(%zu) failed\n", be->name, bytes);
        exit(1);
    }
    if (bytes)
        be->ops->upload(be, d, h, bytes);
    return d;
}

static void *be_fetch(ft_backend *be, const void *d, size_t bytes)
{
    void *h = xmalloc(bytes);
    if (bytes)
        be->ops->download(be, h, d, bytes);
    return h;
}

static void report(const char *what, int ok, const char *fmt, ...)
{
    va_list ap;
    checks++;
    if (!ok)
        failures++;
    printf("%s %s", ok ? "ok  " : "FAIL", what);
    if (fmt) {
        printf(": ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
    }
    printf("\n");
}

/* Compares n floats with |got - ref| <= floor + rtol * max|ref| + rtol * |ref|; returns 1
 * if within tolerance. `floor` is an absolute term for outputs whose exact value may be 0
 * everywhere (then max|ref| is rounding noise too). */
static int close_enough_floor(const char *what, const float *got, const float *ref, size_t n,
                              float rtol, double floor)
{
    double maxref = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
    double atol = floor + rtol * maxref;
    double worst = 0.0;
    size_t worst_i = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        int same_special = (isnan(g) && isnan(r)) || (isinf(g) && isinf(r) && g == r);
        double err = same_special ? 0.0 : fabs(g - r);
        if (isnan(err))
            err = INFINITY;
        double lim = atol + rtol * fabs(r);
        if (err > lim) {
            bad++;
            if (err / (lim > 0 ? lim : 1e-30) > worst) {
                worst = err / (lim > 0 ? lim : 1e-30);
                worst_i = i;
            }
        }
    }
    if (bad)
        report(what, 0, "%zu of %zu outside tolerance (rtol %g, atol %g); worst [%zu] gpu %.9g cpu %.9g",
               bad, n, rtol, atol, worst_i, got[worst_i], ref[worst_i]);
    else
        report(what, 1, NULL);
    return bad == 0;
}

static int close_enough(const char *what, const float *got, const float *ref, size_t n,
                        float rtol)
{
    return close_enough_floor(what, got, ref, n, rtol, 0.0);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(x[i]) > m)
            m = fabs(x[i]);
    return m;
}

static int bitwise(const char *what, const void *a, const void *b, size_t bytes)
{
    int ok = bytes == 0 || memcmp(a, b, bytes) == 0;
    report(what, ok, ok ? NULL : "results differ bitwise");
    return ok;
}

/* ---------------------------------------------------------------- memory */

static void test_memory(void)
{
    size_t before = gpu->bytes_in_use;
    size_t n = 1000003;
    float *d = gpu->ops->alloc(gpu, n * sizeof(float));
    report("alloc returns memory", d != NULL, NULL);
    if (!d)
        return;
    report("bytes_in_use counts the request", gpu->bytes_in_use == before + n * sizeof(float),
           "%zu -> %zu", before, gpu->bytes_in_use);
    report("peak_bytes >= bytes_in_use", gpu->peak_bytes >= gpu->bytes_in_use, NULL);
    float *h = be_fetch(gpu, d, n * sizeof(float));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += h[i] != 0.0f;
    report("alloc is zero-filled", nonzero == 0, "%zu nonzero", nonzero);

    float *src = host_random(n, -1, 1);
    gpu->ops->upload(gpu, d, src, n * sizeof(float));
    float *d2 = gpu->ops->alloc(gpu, n * sizeof(float));
    gpu->ops->copy(gpu, d2, d, n * sizeof(float));
    gpu->ops->zero(gpu, d, 1000 * sizeof(float));
    float *h2 = be_fetch(gpu, d2, n * sizeof(float));
    bitwise("upload + copy + download round trip", h2, src, n * sizeof(float));
    float *h3 = be_fetch(gpu, d, n * sizeof(float));
    int zero_ok = 1;
    for (size_t i = 0; i < n; i++)
        if (h3[i] != (i < 1000 ? 0.0f : src[i]))
            zero_ok = 0;
    report("zero clears exactly the range", zero_ok, NULL);

    /* Small uploads go through a ring of pinned memory without waiting (4 MiB, uploads up
     * to 1 MiB): 40 uploads of 256 KiB from one host buffer rewritten between them wrap
     * the ring twice, and every piece must arrive as it was at its call. */
    {
        const size_t piece = 65536, pieces = 40; /* floats: 256 KiB each */
        float *dst = gpu->ops->alloc(gpu, piece * pieces * sizeof(float));
        float *want = xmalloc(piece * pieces * sizeof(float)), *buf = xmalloc(piece * sizeof(float));
#ifdef FT_CUDA_EMULATION
        long waits0 = cudaemu_host_waits();
#endif
        for (size_t p = 0; p < pieces; p++) {
            for (size_t i = 0; i < piece; i++)
                buf[i] = want[p * piece + i] = (float)(p * 1000003u + i);
            gpu->ops->upload(gpu, dst + p * piece, buf, piece * sizeof(float));
        }
#ifdef FT_CUDA_EMULATION
        /* a wait only where the ring is reused from its start: after 16 and 32 pieces */
        long waits = cudaemu_host_waits() - waits0;
        report("small uploads wait only when their ring wraps", waits == 2, "%ld waits", waits);
#endif
        float *got = be_fetch(gpu, dst, piece * pieces * sizeof(float));
        bitwise("small uploads through the ring, wrapped twice", got, want,
                piece * pieces * sizeof(float));
        gpu->ops->free(gpu, dst);
        free(want), free(buf), free(got);
    }

    void *empty = gpu->ops->alloc(gpu, 0);
    report("alloc(0) gives a freeable pointer", empty != NULL, NULL);
    gpu->ops->free(gpu, empty);
    gpu->ops->free(gpu, d);
    gpu->ops->free(gpu, d2);
    gpu->ops->free(gpu, NULL);
    gpu->ops->sync(gpu);
    report("free returns bytes_in_use", gpu->bytes_in_use == before, "%zu vs %zu",
           gpu->bytes_in_use, before);
    free(h);
    free(h2);
    free(h3);
    free(src);
}

/* Page-locked host memory and the queued copies (the offloaded optimizer's transfers):
 * zero-filled, and a round trip that crosses a device op (a zero of part of the buffer)
 * lands after the sync with the values of the order queued. */
static void test_host_copies(void)
{
    const size_t n = 300007;
    float *h_up = gpu->ops->host_alloc(gpu, n * sizeof(float));
    float *h_down = gpu->ops->host_alloc(gpu, n * sizeof(float));
    report("host_alloc returns memory", h_up && h_down, NULL);
    if (!h_up || !h_down)
        return;
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += h_up[i] != 0.0f || h_down[i] != 0.0f;
    report("host_alloc is zero-filled", nonzero == 0, "%zu nonzero", nonzero);
    float *src = host_random(n, -1, 1);
    memcpy(h_up, src, n * sizeof(float));
    float *d = gpu->ops->alloc(gpu, n * sizeof(float));
    gpu->ops->upload_async(gpu, d, h_up, n * sizeof(float));
    gpu->ops->zero(gpu, d, 1000 * sizeof(float)); /* queued after the upload */
    gpu->ops->download_async(gpu, h_down, d, n * sizeof(float));
    gpu->ops->sync(gpu);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (h_down[i] != (i < 1000 ? 0.0f : src[i]))
            ok = 0;
    report("upload_async, zero, download_async: the queued order after sync", ok, NULL);
    /* a download on the side lane: lane_sync (the host's wait for that lane) covers it */
    memset(h_down, 0, n * sizeof(float));
    gpu->ops->lane_fork(gpu, false);
    gpu->ops->download_async(gpu, h_down, d, n * sizeof(float));
    gpu->ops->lane_join(gpu);
    gpu->ops->lane_sync(gpu);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        if (h_down[i] != (i < 1000 ? 0.0f : src[i]))
            ok = 0;
    report("download_async on the side lane: there after lane_sync", ok, NULL);
    gpu->ops->free(gpu, d);
    gpu->ops->host_free(gpu, h_up);
    gpu->ops->host_free(gpu, h_down);
    gpu->ops->host_free(gpu, NULL);
    free(src);
}

/* ---------------------------------------------------------------- dense algebra */

static void test_matmul_case(int m, int n, int k, bool ta, bool tb, float alpha, float beta,
                             int misalign)
{
    char what[160];
    snprintf(what, sizeof what, "matmul m=%d n=%d k=%d ta=%d tb=%d alpha=%g beta=%g%s", m, n, k,
             ta, tb, alpha, beta, misalign ? " (misaligned)" : "");
    size_t off = misalign ? 1 : 0;
    size_t na = (size_t)m * k + off, nb = (size_t)k * n + off, nc = (size_t)m * n + off;
    float *a = host_random(na, -1, 1), *b = host_random(nb, -1, 1), *c = host_random(nc, -1, 1);
    float *ca = be_dup(cpu, a, na * 4), *cb = be_dup(cpu, b, nb * 4), *cc = be_dup(cpu, c, nc * 4);
    float *ga = be_dup(gpu, a, na * 4), *gb = be_dup(gpu, b, nb * 4), *gc = be_dup(gpu, c, nc * 4);
    cpu->ops->matmul(cpu, FT_GEMM_F32, cc + off, ca + off, cb + off, m, n, k, ta, tb, alpha, beta);
    gpu->ops->matmul(gpu, FT_GEMM_F32, gc + off, ga + off, gb + off, m, n, k, ta, tb, alpha, beta);
    float *rc = be_fetch(cpu, cc, nc * 4), *rg = be_fetch(gpu, gc, nc * 4);
    close_enough(what, rg, rc, nc, 1e-4f);
    cpu->ops->free(cpu, ca), cpu->ops->free(cpu, cb), cpu->ops->free(cpu, cc);
    gpu->ops->free(gpu, ga), gpu->ops->free(gpu, gb), gpu->ops->free(gpu, gc);
    free(a), free(b), free(c), free(rc), free(rg);
}

static void test_matmul(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {17, 33, 9}, {64, 128, 256}, {130, 7, 65},
                                    {3, 300, 1000}, {256, 512, 128}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            test_matmul_case(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, (t >> 1) & 1, 1.0f,
                             0.0f, 0);
    test_matmul_case(33, 17, 65, false, true, 0.5f, 2.0f, 0);
    test_matmul_case(33, 17, 65, true, false, -1.0f, 1.0f, 1);
    test_matmul_case(64, 64, 64, false, false, 1.0f, 1.0f, 1);
    test_matmul_case(5, 7, 0, false, false, 1.0f, 0.0f, 0);
    test_matmul_case(5, 7, 0, false, true, 1.0f, 3.0f, 0);
    /* The same shape again hits the plan cache. */
    test_matmul_case(64, 128, 256, false, true, 1.0f, 0.0f, 0);

    /* beta == 0 must not read c: NaN in c stays out of the result. */
    int m = 9, n = 11, k = 5;
    float *a = host_random((size_t)m * k, -1, 1), *b = host_random((size_t)k * n, -1, 1);
    float *c = xmalloc((size_t)m * n * 4);
    for (int i = 0; i < m * n; i++)
        c[i] = NAN;
    float *ga = be_dup(gpu, a, (size_t)m * k * 4), *gb = be_dup(gpu, b, (size_t)k * n * 4);
    float *gc = be_dup(gpu, c, (size_t)m * n * 4);
    gpu->ops->matmul(gpu, FT_GEMM_F32, gc, ga, gb, m, n, k, false, false, 1.0f, 0.0f);
    float *r = be_fetch(gpu, gc, (size_t)m * n * 4);
    int finite = 1;
    for (int i = 0; i < m * n; i++)
        finite &= isfinite(r[i]) != 0;
    report("matmul beta=0 ignores NaN in c", finite, NULL);
    gpu->ops->free(gpu, ga), gpu->ops->free(gpu, gb), gpu->ops->free(gpu, gc);
    free(a), free(b), free(c), free(r);
}

static void test_vector_ops(void)
{
    size_t sizes[] = {1, 1000, 1000003};
    for (size_t s = 0; s < 3; s++) {
        size_t n = sizes[s];
        char what[96];
        float *x = host_random(n, -3, 3), *y = host_random(n, -3, 3);
        float *cx = be_dup(cpu, x, n * 4), *cy = be_dup(cpu, y, n * 4);
        float *gx = be_dup(gpu, x, n * 4), *gy = be_dup(gpu, y, n * 4);
        cpu->ops->add(cpu, cy, cx, n);
        gpu->ops->add(gpu, gy, gx, n);
        cpu->ops->scale(cpu, cy, 0.37f, n);
        gpu->ops->scale(gpu, gy, 0.37f, n);
        float *rc = be_fetch(cpu, cy, n * 4), *rg = be_fetch(gpu, gy, n * 4);
        snprintf(what, sizeof what, "add + scale n=%zu", n);
        close_enough(what, rg, rc, n, 1e-5f);
        snprintf(what, sizeof what, "add + scale n=%zu bitwise", n);
        bitwise(what, rg, rc, n * 4);

        double sc = cpu->ops->sum_squares(cpu, cx, n);
        double sg = gpu->ops->sum_squares(gpu, gx, n);
        double sg2 = gpu->ops->sum_squares(gpu, gx, n);
        snprintf(what, sizeof what, "sum_squares n=%zu", n);
        report(what, fabs(sg - sc) <= 1e-9 * fabs(sc), "gpu %.17g cpu %.17g", sg, sc);
        snprintf(what, sizeof what, "sum_squares n=%zu reproducible", n);
        report(what, sg == sg2, NULL);
        if (n > 1) { /* one float off 16-byte alignment: the one-value-at-a-time path */
            double uc = cpu->ops->sum_squares(cpu, cx + 1, n - 1);
            double ug = gpu->ops->sum_squares(gpu, gx + 1, n - 1);
            snprintf(what, sizeof what, "sum_squares n=%zu, unaligned", n - 1);
            report(what, fabs(ug - uc) <= 1e-9 * fabs(uc), "gpu %.17g cpu %.17g", ug, uc);
        }
        cpu->ops->free(cpu, cx), cpu->ops->free(cpu, cy);
        gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gy);
        free(x), free(y), free(rc), free(rg);
    }
    report("sum_squares n=0", gpu->ops->sum_squares(gpu, NULL, 0) == 0.0, NULL);

    /* sum_squares_each: each result bitwise sum_squares', empty buffers included, and
     * (on the harness, which counts them) one host wait for all of them once its pinned
     * buffer has grown */
    {
        const size_t ns[4] = { 70001, 0, 5, 1 << 20 };
        const float *xs[4];
        float *bufs[4];
        double each[4], alone[4];
        for (int i = 0; i < 4; i++) {
            float *h = host_random(ns[i] ? ns[i] : 1, -2, 2);
            bufs[i] = be_dup(gpu, h, (ns[i] ? ns[i] : 1) * 4);
            xs[i] = bufs[i];
            alone[i] = gpu->ops->sum_squares(gpu, bufs[i], ns[i]);
            free(h);
        }
        gpu->ops->sum_squares_each(gpu, xs, ns, 4, each); /* the first call grows its buffer */
#ifdef FT_CUDA_EMULATION
        long waits0 = cudaemu_host_waits();
#endif
        gpu->ops->sum_squares_each(gpu, xs, ns, 4, each);
#ifdef FT_CUDA_EMULATION
        report("sum_squares_each waits once", cudaemu_host_waits() - waits0 == 1, "%ld waits",
               cudaemu_host_waits() - waits0);
#endif
        for (int i = 0; i < 4; i++) {
            char what[64];
            snprintf(what, sizeof what, "sum_squares_each[%d] == sum_squares", i);
            report(what, each[i] == alone[i], "%.17g vs %.17g", each[i], alone[i]);
            gpu->ops->free(gpu, bufs[i]);
        }
    }
}

/* ---------------------------------------------------------------- rmsnorm, rope */

static void test_rmsnorm_case(int rows, int dim)
{
    char what[96];
    size_t n = (size_t)rows * dim;
    float eps = 1e-5f;
    float *x = host_random(n, -2, 2), *w = host_random((size_t)dim, 0.5f, 1.5f);
    float *dy = host_random(n, -1, 1), *dx0 = host_random(n, -1, 1);
    float *dw0 = host_random((size_t)dim, -1, 1);
    float *cx = be_dup(cpu, x, n * 4), *cw = be_dup(cpu, w, dim * 4u);
    float *gx = be_dup(gpu, x, n * 4), *gw = be_dup(gpu, w, dim * 4u);
    float *cy = cpu->ops->alloc(cpu, n * 4), *gy = gpu->ops->alloc(gpu, n * 4);
    float *cr = cpu->ops->alloc(cpu, rows * 4u), *gr = gpu->ops->alloc(gpu, rows * 4u);
    cpu->ops->rmsnorm_fwd(cpu, FT_DTYPE_F32, cy, cr, cx, cw, rows, dim, eps);
    gpu->ops->rmsnorm_fwd(gpu, FT_DTYPE_F32, gy, gr, gx, gw, rows, dim, eps);
    float *ry_c = be_fetch(cpu, cy, n * 4), *ry_g = be_fetch(gpu, gy, n * 4);
    float *rr_c = be_fetch(cpu, cr, rows * 4u), *rr_g = be_fetch(gpu, gr, rows * 4u);
    snprintf(what, sizeof what, "rmsnorm_fwd y rows=%d dim=%d", rows, dim);
    close_enough(what, ry_g, ry_c, n, 1e-4f);
    snprintf(what, sizeof what, "rmsnorm_fwd rstd rows=%d dim=%d", rows, dim);
    close_enough(what, rr_g, rr_c, (size_t)rows, 1e-4f);

    float *cdy = be_dup(cpu, dy, n * 4), *gdy = be_dup(gpu, dy, n * 4);
    float *cdx = be_dup(cpu, dx0, n * 4), *gdx = be_dup(gpu, dx0, n * 4);
    float *cdw = be_dup(cpu, dw0, dim * 4u), *gdw = be_dup(gpu, dw0, dim * 4u);
    /* Both backends get the CPU's rstd so the backward is compared alone. */
    float *grc = be_dup(gpu, rr_c, rows * 4u);
    cpu->ops->rmsnorm_bwd(cpu, FT_DTYPE_F32, FT_DTYPE_F32, cdx, cdx, cdw, cdy, cx, cw, cr, rows, dim);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdx, gdx, gdw, gdy, gx, gw, grc, rows, dim);
    float *rdx_c = be_fetch(cpu, cdx, n * 4), *rdx_g = be_fetch(gpu, gdx, n * 4);
    float *rdw_c = be_fetch(cpu, cdw, dim * 4u), *rdw_g = be_fetch(gpu, gdw, dim * 4u);
    snprintf(what, sizeof what, "rmsnorm_bwd dx (accumulate) rows=%d dim=%d", rows, dim);
    close_enough(what, rdx_g, rdx_c, n, 1e-4f);
    snprintf(what, sizeof what, "rmsnorm_bwd dw (accumulate) rows=%d dim=%d", rows, dim);
    close_enough(what, rdw_g, rdw_c, (size_t)dim, 1e-4f);
    /* Reproducibility: same call on fresh accumulators twice. */
    gpu->ops->upload(gpu, gdw, dw0, dim * 4u);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdx, gdx, gdw, gdy, gx, gw, grc, rows, dim);
    float *rdw_1 = be_fetch(gpu, gdw, dim * 4u);
    gpu->ops->upload(gpu, gdw, dw0, dim * 4u);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdx, gdx, gdw, gdy, gx, gw, grc, rows, dim);
    float *rdw_2 = be_fetch(gpu, gdw, dim * 4u);
    snprintf(what, sizeof what, "rmsnorm_bwd dw reproducible rows=%d dim=%d", rows, dim);
    bitwise(what, rdw_1, rdw_2, dim * 4u);

    void *cfree[] = {cx, cw, cy, cr, cdy, cdx, cdw};
    void *gfree[] = {gx, gw, gy, gr, gdy, gdx, gdw, grc};
    for (size_t i = 0; i < sizeof cfree / sizeof cfree[0]; i++)
        cpu->ops->free(cpu, cfree[i]);
    for (size_t i = 0; i < sizeof gfree / sizeof gfree[0]; i++)
        gpu->ops->free(gpu, gfree[i]);
    void *hfree[] = {x, w, dy, dx0, dw0, ry_c, ry_g, rr_c, rr_g, rdx_c, rdx_g, rdw_c, rdw_g,
                     rdw_1, rdw_2};
    for (size_t i = 0; i < sizeof hfree / sizeof hfree[0]; i++)
        free(hfree[i]);
}

/* rot_dim < head_dim leaves the tail of each head alone; interleaved pairs 2i, 2i+1
 * (GPT-J) instead of i, i + rot_dim/2. */
static void test_rope_case(int tokens, int n_heads, int head_dim, int rot_dim, int interleaved)
{
    char what[128], geo[48];
    const ft_rope_shape shape = { head_dim, rot_dim, interleaved != 0 };
    int half = rot_dim / 2, max_pos = 97;
    size_t n = (size_t)tokens * n_heads * head_dim;
    snprintf(geo, sizeof geo, "head_dim=%d rot_dim=%d%s", head_dim, rot_dim,
             interleaved ? " interleaved" : "");
    float *ct = xmalloc((size_t)max_pos * half * 4), *stab = xmalloc((size_t)max_pos * half * 4);
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < half; i++) {
            double inv = pow(10000.0, -2.0 * i / rot_dim);
            ct[(size_t)p * half + i] = (float)cos(p * inv);
            stab[(size_t)p * half + i] = (float)sin(p * inv);
        }
    int32_t *pos = xmalloc((size_t)tokens * 4);
    for (int t = 0; t < tokens; t++)
        pos[t] = (int32_t)(rng_u32() % (uint32_t)max_pos);
    float *x = host_random(n, -2, 2);
    float *cx = be_dup(cpu, x, n * 4), *gx = be_dup(gpu, x, n * 4);
    float *cc = be_dup(cpu, ct, (size_t)max_pos * half * 4);
    float *cs = be_dup(cpu, stab, (size_t)max_pos * half * 4);
    float *gc = be_dup(gpu, ct, (size_t)max_pos * half * 4);
    float *gs = be_dup(gpu, stab, (size_t)max_pos * half * 4);
    int32_t *cp = be_dup(cpu, pos, (size_t)tokens * 4), *gp = be_dup(gpu, pos, (size_t)tokens * 4);
    for (int inverse = 0; inverse < 2; inverse++) {
        cpu->ops->rope(cpu, FT_DTYPE_F32, cx, cc, cs, cp, tokens, n_heads, shape, inverse);
        gpu->ops->rope(gpu, FT_DTYPE_F32, gx, gc, gs, gp, tokens, n_heads, shape, inverse);
        float *rc = be_fetch(cpu, cx, n * 4), *rg = be_fetch(gpu, gx, n * 4);
        snprintf(what, sizeof what, "rope%s tokens=%d heads=%d %s",
                 inverse ? " (then inverse)" : "", tokens, n_heads, geo);
        close_enough(what, rg, rc, n, 1e-5f);
        snprintf(what, sizeof what, "rope%s tokens=%d heads=%d %s bitwise",
                 inverse ? " (then inverse)" : "", tokens, n_heads, geo);
        bitwise(what, rg, rc, n * 4);
        if (!inverse && rot_dim < head_dim) {
            int same = 1;
            for (size_t th = 0; th < (size_t)tokens * n_heads; th++)
                same &= memcmp(rg + th * head_dim + rot_dim, x + th * head_dim + rot_dim,
                               (size_t)(head_dim - rot_dim) * 4) == 0;
            snprintf(what, sizeof what, "rope leaves dims past rot_dim alone %s", geo);
            report(what, same, NULL);
        }
        if (inverse) {
            snprintf(what, sizeof what, "rope inverse undoes forward %s", geo);
            close_enough(what, rg, x, n, 1e-5f);
        }
        free(rc), free(rg);
    }
    cpu->ops->free(cpu, cx), cpu->ops->free(cpu, cc), cpu->ops->free(cpu, cs);
    cpu->ops->free(cpu, cp);
    gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gc), gpu->ops->free(gpu, gs);
    gpu->ops->free(gpu, gp);
    free(ct), free(stab), free(pos), free(x);
}

/* ---------------------------------------------------------------- layernorm, gelu */

static void test_layernorm_case(int rows, int dim)
{
    char what[96];
    size_t n = (size_t)rows * dim;
    float eps = 1e-5f;
    float *x = host_random(n, -2, 2), *w = host_random((size_t)dim, 0.5f, 1.5f);
    float *b = host_random((size_t)dim, -0.5f, 0.5f);
    float *dy = host_random(n, -1, 1), *dx0 = host_random(n, -1, 1);
    float *dw0 = host_random((size_t)dim, -1, 1), *db0 = host_random((size_t)dim, -1, 1);
    float *cx = be_dup(cpu, x, n * 4), *cw = be_dup(cpu, w, dim * 4u), *cb = be_dup(cpu, b, dim * 4u);
    float *gx = be_dup(gpu, x, n * 4), *gw = be_dup(gpu, w, dim * 4u), *gb = be_dup(gpu, b, dim * 4u);
    float *cy = cpu->ops->alloc(cpu, n * 4), *gy = gpu->ops->alloc(gpu, n * 4);
    float *cm = cpu->ops->alloc(cpu, rows * 4u), *gm = gpu->ops->alloc(gpu, rows * 4u);
    float *cr = cpu->ops->alloc(cpu, rows * 4u), *gr = gpu->ops->alloc(gpu, rows * 4u);
    cpu->ops->layernorm_fwd(cpu, FT_DTYPE_F32, cy, cm, cr, cx, cw, cb, rows, dim, eps);
    gpu->ops->layernorm_fwd(gpu, FT_DTYPE_F32, gy, gm, gr, gx, gw, gb, rows, dim, eps);
    float *ry_c = be_fetch(cpu, cy, n * 4), *ry_g = be_fetch(gpu, gy, n * 4);
    float *rm_c = be_fetch(cpu, cm, rows * 4u), *rm_g = be_fetch(gpu, gm, rows * 4u);
    float *rr_c = be_fetch(cpu, cr, rows * 4u), *rr_g = be_fetch(gpu, gr, rows * 4u);
    snprintf(what, sizeof what, "layernorm_fwd y rows=%d dim=%d", rows, dim);
    close_enough(what, ry_g, ry_c, n, 1e-4f);
    snprintf(what, sizeof what, "layernorm_fwd mean rows=%d dim=%d", rows, dim);
    close_enough_floor(what, rm_g, rm_c, (size_t)rows, 1e-4f, 1e-6);
    snprintf(what, sizeof what, "layernorm_fwd rstd rows=%d dim=%d", rows, dim);
    close_enough(what, rr_g, rr_c, (size_t)rows, 1e-4f);

    float *cdy = be_dup(cpu, dy, n * 4), *gdy = be_dup(gpu, dy, n * 4);
    float *cdx = be_dup(cpu, dx0, n * 4), *gdx = be_dup(gpu, dx0, n * 4);
    float *cdw = be_dup(cpu, dw0, dim * 4u), *gdw = be_dup(gpu, dw0, dim * 4u);
    float *cdb = be_dup(cpu, db0, dim * 4u), *gdb = be_dup(gpu, db0, dim * 4u);
    /* Both backends get the CPU's statistics so the backward is compared alone. */
    float *gmc = be_dup(gpu, rm_c, rows * 4u), *grc = be_dup(gpu, rr_c, rows * 4u);
    cpu->ops->layernorm_bwd(cpu, FT_DTYPE_F32, FT_DTYPE_F32, cdx, cdx, cdw, cdb, cdy, cx, cw, cm, cr,
                            rows, dim);
    gpu->ops->layernorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdx, gdx, gdw, gdb, gdy, gx, gw, gmc, grc,
                            rows, dim);
    float *rdx_c = be_fetch(cpu, cdx, n * 4), *rdx_g = be_fetch(gpu, gdx, n * 4);
    float *rdw_c = be_fetch(cpu, cdw, dim * 4u), *rdw_g = be_fetch(gpu, gdw, dim * 4u);
    float *rdb_c = be_fetch(cpu, cdb, dim * 4u), *rdb_g = be_fetch(gpu, gdb, dim * 4u);
    snprintf(what, sizeof what, "layernorm_bwd dx (accumulate) rows=%d dim=%d", rows, dim);
    close_enough(what, rdx_g, rdx_c, n, 1e-4f);
    snprintf(what, sizeof what, "layernorm_bwd dw (accumulate) rows=%d dim=%d", rows, dim);
    close_enough(what, rdw_g, rdw_c, (size_t)dim, 1e-4f);
    snprintf(what, sizeof what, "layernorm_bwd db (accumulate) rows=%d dim=%d", rows, dim);
    close_enough(what, rdb_g, rdb_c, (size_t)dim, 1e-4f);
    /* Reproducibility: same call on fresh accumulators twice. */
    float *rep[2][2];
    for (int k = 0; k < 2; k++) {
        gpu->ops->upload(gpu, gdw, dw0, dim * 4u);
        gpu->ops->upload(gpu, gdb, db0, dim * 4u);
        gpu->ops->layernorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdx, gdx, gdw, gdb, gdy, gx, gw, gmc,
                                grc, rows, dim);
        rep[k][0] = be_fetch(gpu, gdw, dim * 4u);
        rep[k][1] = be_fetch(gpu, gdb, dim * 4u);
    }
    snprintf(what, sizeof what, "layernorm_bwd dw reproducible rows=%d dim=%d", rows, dim);
    bitwise(what, rep[0][0], rep[1][0], dim * 4u);
    snprintf(what, sizeof what, "layernorm_bwd db reproducible rows=%d dim=%d", rows, dim);
    bitwise(what, rep[0][1], rep[1][1], dim * 4u);

    void *cfree[] = {cx, cw, cb, cy, cm, cr, cdy, cdx, cdw, cdb};
    void *gfree[] = {gx, gw, gb, gy, gm, gr, gdy, gdx, gdw, gdb, gmc, grc};
    for (size_t i = 0; i < sizeof cfree / sizeof cfree[0]; i++)
        cpu->ops->free(cpu, cfree[i]);
    for (size_t i = 0; i < sizeof gfree / sizeof gfree[0]; i++)
        gpu->ops->free(gpu, gfree[i]);
    void *hfree[] = {x, w, b, dy, dx0, dw0, db0, ry_c, ry_g, rm_c, rm_g, rr_c, rr_g, rdx_c,
                     rdx_g, rdw_c, rdw_g, rdb_c, rdb_g, rep[0][0], rep[0][1], rep[1][0],
                     rep[1][1]};
    for (size_t i = 0; i < sizeof hfree / sizeof hfree[0]; i++)
        free(hfree[i]);
}

static void test_gelu_case(size_t n, ft_gelu_kind kind)
{
    char what[96];
    const char *name = kind == FT_GELU_TANH ? "tanh" : "erf";
    float *x = host_random(n, -6, 6), *d = host_random(n, -1, 1);
    float *cx = be_dup(cpu, x, n * 4), *cd = be_dup(cpu, d, n * 4);
    float *gx = be_dup(gpu, x, n * 4), *gd = be_dup(gpu, d, n * 4);
    float *co = cpu->ops->alloc(cpu, n * 4), *go = gpu->ops->alloc(gpu, n * 4);
    float *cdx = cpu->ops->alloc(cpu, n * 4), *gdx = gpu->ops->alloc(gpu, n * 4);
    cpu->ops->gelu_fwd(cpu, FT_DTYPE_F32, kind, co, cx, n);
    gpu->ops->gelu_fwd(gpu, FT_DTYPE_F32, kind, go, gx, n);
    cpu->ops->gelu_bwd(cpu, FT_DTYPE_F32, kind, cdx, cd, cx, n);
    gpu->ops->gelu_bwd(gpu, FT_DTYPE_F32, kind, gdx, gd, gx, n);
    float *r1 = be_fetch(cpu, co, n * 4), *r2 = be_fetch(gpu, go, n * 4);
    snprintf(what, sizeof what, "gelu_fwd %s n=%zu", name, n);
    close_enough(what, r2, r1, n, 1e-5f);
    free(r1), free(r2);
    r1 = be_fetch(cpu, cdx, n * 4), r2 = be_fetch(gpu, gdx, n * 4);
    snprintf(what, sizeof what, "gelu_bwd %s n=%zu", name, n);
    close_enough(what, r2, r1, n, 1e-5f);
    /* in place over dout: the same bits as into a separate buffer */
    gpu->ops->gelu_bwd(gpu, FT_DTYPE_F32, kind, gd, gd, gx, n);
    float *r3 = be_fetch(gpu, gd, n * 4);
    snprintf(what, sizeof what, "gelu_bwd %s n=%zu in place", name, n);
    bitwise(what, r3, r2, n * 4);
    free(r1), free(r2), free(r3);
    void *cfree[] = {cx, cd, co, cdx};
    void *gfree[] = {gx, gd, go, gdx};
    for (int i = 0; i < 4; i++) {
        cpu->ops->free(cpu, cfree[i]);
        gpu->ops->free(gpu, gfree[i]);
    }
    free(x), free(d);
}

/* The far negative tail, element by element relative to itself: both backends compute
 * gelu there without cancellation (1 + erf as erfc, 1 + tanh from exp(-2|u|)). */
static void test_gelu_tail(ft_gelu_kind kind)
{
    char what[96];
    size_t n = 4001;
    float *x = xmalloc(n * 4), *one = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = -8.0f + 7.0f * (float)i / (float)(n - 1), one[i] = 1.0f;
    float *cx = be_dup(cpu, x, n * 4), *gx = be_dup(gpu, x, n * 4);
    float *cd = be_dup(cpu, one, n * 4), *gd = be_dup(gpu, one, n * 4);
    float *co = cpu->ops->alloc(cpu, n * 4), *go = gpu->ops->alloc(gpu, n * 4);
    for (int bwd = 0; bwd < 2; bwd++) {
        if (bwd) { /* gelu' itself: dout = 1, in place */
            cpu->ops->gelu_bwd(cpu, FT_DTYPE_F32, kind, cd, cd, cx, n);
            gpu->ops->gelu_bwd(gpu, FT_DTYPE_F32, kind, gd, gd, gx, n);
        } else {
            cpu->ops->gelu_fwd(cpu, FT_DTYPE_F32, kind, co, cx, n);
            gpu->ops->gelu_fwd(gpu, FT_DTYPE_F32, kind, go, gx, n);
        }
        float *rc = be_fetch(cpu, bwd ? cd : co, n * 4), *rg = be_fetch(gpu, bwd ? gd : go, n * 4);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)rg[i] - rc[i]) / fabs((double)rc[i]));
        snprintf(what, sizeof what, "gelu_%s %s tail x in [-8, -1], relative to each element",
                 bwd ? "bwd" : "fwd", kind == FT_GELU_TANH ? "tanh" : "erf");
        report(what, worst <= 2e-5, "max relative error %.3g", worst);
        free(rc), free(rg);
    }
    cpu->ops->free(cpu, cx), cpu->ops->free(cpu, cd), cpu->ops->free(cpu, co);
    gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gd), gpu->ops->free(gpu, go);
    free(x), free(one);
}

/* ---------------------------------------------------------------- attention */

/* Segment ids per row: 0 = none (NULL), 1 = increasing documents of random
 * length, 2 = a non-monotone pattern (ids repeat after a gap), which the tile
 * skipping must still handle (tokens of one id in two places attend each other). */
static int32_t *make_segments(int batch, int seq, int kind)
{
    if (kind == 0)
        return NULL;
    int32_t *s = xmalloc((size_t)batch * seq * 4 + 4);
    for (int b = 0; b < batch; b++) {
        int id = 0, left = 1 + (int)(rng_u32() % 40);
        for (int t = 0; t < seq; t++) {
            if (kind == 1) {
                if (left-- == 0) {
                    id++;
                    left = (int)(rng_u32() % 50);
                }
                s[(size_t)b * seq + t] = id;
            } else {
                s[(size_t)b * seq + t] = (t / 5) % 3 == 1 ? 7 : (t / 23);
            }
        }
    }
    return s;
}

static void test_attention_case(int batch, int seq, int n_heads, int n_kv, int hd, int seg_kind,
                                int window)
{
    char what[192], tag[128];
    snprintf(tag, sizeof tag, "B=%d T=%d H=%d KV=%d D=%d seg=%s window=%d", batch, seq, n_heads,
             n_kv, hd, seg_kind == 0 ? "none" : seg_kind == 1 ? "docs" : "scattered", window);
    ft_attn_shape s = {batch, seq, n_heads, n_kv, hd, window};
    size_t tokens = (size_t)batch * seq;
    size_t nq = tokens * n_heads * hd, nkv = tokens * n_kv * hd;
    size_t nl = (size_t)batch * n_heads * seq;
    float *q = host_random(nq, -2, 2), *k = host_random(nkv, -2, 2), *v = host_random(nkv, -1, 1);
    float *dout = host_random(nq, -1, 1);
    int32_t *seg = make_segments(batch, seq, seg_kind);

    float *cq = be_dup(cpu, q, nq * 4), *ck = be_dup(cpu, k, nkv * 4), *cv = be_dup(cpu, v, nkv * 4);
    float *gq = be_dup(gpu, q, nq * 4), *gk = be_dup(gpu, k, nkv * 4), *gv = be_dup(gpu, v, nkv * 4);
    int32_t *cseg = seg ? be_dup(cpu, seg, tokens * 4) : NULL;
    int32_t *gseg = seg ? be_dup(gpu, seg, tokens * 4) : NULL;
    float *co = cpu->ops->alloc(cpu, nq * 4), *go = gpu->ops->alloc(gpu, nq * 4);
    float *cl = cpu->ops->alloc(cpu, nl * 4), *gl = gpu->ops->alloc(gpu, nl * 4);

    /* Overwrite semantics: outputs start as NaN on the GPU. */
    float *nan_buf = xmalloc(nq * 4);
    for (size_t i = 0; i < nq; i++)
        nan_buf[i] = NAN;
    gpu->ops->upload(gpu, go, nan_buf, nq * 4);
    gpu->ops->upload(gpu, gl, nan_buf, nl * 4);

    cpu->ops->attention_fwd(cpu, FT_DTYPE_F32, co, cl, cq, ck, cv, cseg, s);
    gpu->ops->attention_fwd(gpu, FT_DTYPE_F32, go, gl, gq, gk, gv, gseg, s);
    float *ro_c = be_fetch(cpu, co, nq * 4), *ro_g = be_fetch(gpu, go, nq * 4);
    float *rl_c = be_fetch(cpu, cl, nl * 4), *rl_g = be_fetch(gpu, gl, nl * 4);
    snprintf(what, sizeof what, "attention_fwd out %s", tag);
    close_enough(what, ro_g, ro_c, nq, 1e-4f);
    snprintf(what, sizeof what, "attention_fwd lse %s", tag);
    close_enough(what, rl_g, rl_c, nl, 1e-4f);

    /* Backward from the CPU's forward results, so that it is compared alone. */
    float *cdo = be_dup(cpu, dout, nq * 4), *gdo = be_dup(gpu, dout, nq * 4);
    float *go_c = be_dup(gpu, ro_c, nq * 4), *gl_c = be_dup(gpu, rl_c, nl * 4);
    float *cdq = cpu->ops->alloc(cpu, nq * 4), *cdk = cpu->ops->alloc(cpu, nkv * 4);
    float *cdv = cpu->ops->alloc(cpu, nkv * 4);
    float *gdq = be_dup(gpu, nan_buf, nq * 4), *gdk = be_dup(gpu, nan_buf, nkv * 4);
    float *gdv = be_dup(gpu, nan_buf, nkv * 4);
    cpu->ops->attention_bwd(cpu, FT_DTYPE_F32, cdq, cdk, cdv, cdo, co, cl, cq, ck, cv, cseg, s);
    gpu->ops->attention_bwd(gpu, FT_DTYPE_F32, gdq, gdk, gdv, gdo, go_c, gl_c, gq, gk, gv, gseg, s);
    float *rdq_c = be_fetch(cpu, cdq, nq * 4), *rdq_g = be_fetch(gpu, gdq, nq * 4);
    float *rdk_c = be_fetch(cpu, cdk, nkv * 4), *rdk_g = be_fetch(gpu, gdk, nkv * 4);
    float *rdv_c = be_fetch(cpu, cdv, nkv * 4), *rdv_g = be_fetch(gpu, gdv, nkv * 4);
    /* dq and dk are sums of P_ij (dO_i.v_j - dO_i.o_i) k_j (resp. q_i) scale: where a query
     * sees one key (T = 1, or a one-token document) the two dot products are equal and the
     * exact result is 0, but each backend keeps their rounding noise, up to eps hd |dO| |v|,
     * times |k| scale = |k| / sqrt(hd). An absolute floor of 16x that keeps those cases
     * compared without flagging noise (3e-5 at head_dim 256 with these inputs, whose dq is
     * of order 1: it hides no bug). */
    double noise = 16.0 * 6e-8 * sqrt((double)hd) * max_abs(dout, nq) * max_abs(v, nkv);
    double floor_dq = noise * max_abs(k, nkv), floor_dk = noise * max_abs(q, nq);
    snprintf(what, sizeof what, "attention_bwd dq %s", tag);
    close_enough_floor(what, rdq_g, rdq_c, nq, 1e-4f, floor_dq);
    snprintf(what, sizeof what, "attention_bwd dk %s", tag);
    close_enough_floor(what, rdk_g, rdk_c, nkv, 1e-4f, floor_dk);
    snprintf(what, sizeof what, "attention_bwd dv %s", tag);
    close_enough(what, rdv_g, rdv_c, nkv, 1e-4f);

    /* Reproducibility of the backward. */
    gpu->ops->attention_bwd(gpu, FT_DTYPE_F32, gdq, gdk, gdv, gdo, go_c, gl_c, gq, gk, gv, gseg, s);
    float *rdq_2 = be_fetch(gpu, gdq, nq * 4), *rdk_2 = be_fetch(gpu, gdk, nkv * 4);
    float *rdv_2 = be_fetch(gpu, gdv, nkv * 4);
    snprintf(what, sizeof what, "attention_bwd reproducible %s", tag);
    int same = memcmp(rdq_2, rdq_g, nq * 4) == 0 && memcmp(rdk_2, rdk_g, nkv * 4) == 0 &&
               memcmp(rdv_2, rdv_g, nkv * 4) == 0;
    report(what, same, same ? NULL : "two runs differ bitwise");

    void *cfree[] = {cq, ck, cv, cseg, co, cl, cdo, cdq, cdk, cdv};
    void *gfree[] = {gq, gk, gv, gseg, go, gl, gdo, go_c, gl_c, gdq, gdk, gdv};
    for (size_t i = 0; i < sizeof cfree / sizeof cfree[0]; i++)
        if (cfree[i])
            cpu->ops->free(cpu, cfree[i]);
    for (size_t i = 0; i < sizeof gfree / sizeof gfree[0]; i++)
        if (gfree[i])
            gpu->ops->free(gpu, gfree[i]);
    void *hfree[] = {q, k, v, dout, seg, nan_buf, ro_c, ro_g, rl_c, rl_g, rdq_c, rdq_g, rdk_c,
                     rdk_g, rdv_c, rdv_g, rdq_2, rdk_2, rdv_2};
    for (size_t i = 0; i < sizeof hfree / sizeof hfree[0]; i++)
        free(hfree[i]);
}

static void test_attention(void)
{
    static const int seqs[] = {1, 7, 65, 130};
    static const int dims[] = {16, 64, 128};
    static const int heads[][2] = {{2, 2}, {4, 2}, {4, 1}};
    for (size_t d = 0; d < 3; d++)
        for (size_t t = 0; t < 4; t++)
            for (size_t h = 0; h < 3; h++)
                for (int seg = 0; seg < 3; seg++) {
                    /* Keep the run short: every (dim, seq) sees every mask, the
                     * head layouts rotate through the masks. */
                    if (seg != 0 && (size_t)seg != h && !(h == 0 && seg == 1))
                        continue;
                    test_attention_case(2, seqs[t], heads[h][0], heads[h][1], dims[d], seg, 0);
                }
    /* Head dims that use the generic paths (not 64/128) and the 256 class. */
    test_attention_case(2, 70, 4, 2, 80, 1, 0);
    test_attention_case(2, 33, 2, 1, 2, 0, 0);
    test_attention_case(1, 100, 2, 2, 200, 1, 0);
    test_attention_case(2, 77, 2, 1, 256, 2, 0);
    /* Longer rows: many tiles, skipping before the document start. */
    test_attention_case(1, 600, 4, 1, 64, 1, 0);
    test_attention_case(1, 300, 2, 2, 128, 1, 0);
    /* Sliding window (Mistral): only itself, inside a tile, across tiles with
     * most key tiles skipped, with documents and scattered ids. */
    test_attention_case(2, 70, 4, 2, 80, 2, 1);
    test_attention_case(2, 130, 4, 2, 64, 1, 5);
    test_attention_case(1, 600, 4, 1, 64, 0, 100);
    test_attention_case(1, 300, 2, 2, 128, 1, 64);
}

/* ---------------------------------------------------------------- bias (qwen2) */

static void test_bias_case(int rows, int dim)
{
    char what[96];
    size_t n = (size_t)rows * dim;
    float *y = host_random(n, -2, 2), *b = host_random(dim, -1, 1), *dy = host_random(n, -1, 1);
    float *db = host_random(dim, -1, 1); /* bias_grad accumulates onto it */
    float *cy = be_dup(cpu, y, n * 4), *cb = be_dup(cpu, b, dim * 4), *cdy = be_dup(cpu, dy, n * 4);
    float *gy = be_dup(gpu, y, n * 4), *gb = be_dup(gpu, b, dim * 4), *gdy = be_dup(gpu, dy, n * 4);
    float *cdb = be_dup(cpu, db, dim * 4), *gdb = be_dup(gpu, db, dim * 4);
    cpu->ops->bias_add(cpu, FT_DTYPE_F32, FT_DTYPE_F32, cy, cb, rows, dim);
    gpu->ops->bias_add(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gy, gb, rows, dim);
    cpu->ops->bias_grad(cpu, FT_DTYPE_F32, FT_DTYPE_F32, cdb, cdy, rows, dim);
    gpu->ops->bias_grad(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdb, gdy, rows, dim);
    float *r1 = be_fetch(cpu, cy, n * 4), *r2 = be_fetch(gpu, gy, n * 4);
    snprintf(what, sizeof what, "bias_add %dx%d", rows, dim);
    bitwise(what, r1, r2, n * 4); /* one fp32 add per element on both */
    free(r1), free(r2);
    r1 = be_fetch(cpu, cdb, dim * 4), r2 = be_fetch(gpu, gdb, dim * 4);
    snprintf(what, sizeof what, "bias_grad %dx%d", rows, dim);
    close_enough(what, r2, r1, dim, 1e-5f);
    free(r1), free(r2);
    void *cfree[] = {cy, cb, cdy, cdb};
    void *gfree[] = {gy, gb, gdy, gdb};
    for (int i = 0; i < 4; i++) {
        cpu->ops->free(cpu, cfree[i]);
        gpu->ops->free(gpu, gfree[i]);
    }
    free(y), free(b), free(dy), free(db);
}

/* ---------------------------------------------------------------- swiglu */

static void test_swiglu(void)
{
    size_t n = 1000003;
    float *g = host_random(n, -8, 8), *u = host_random(n, -2, 2), *d = host_random(n, -1, 1);
    float *cg = be_dup(cpu, g, n * 4), *cu = be_dup(cpu, u, n * 4), *cd = be_dup(cpu, d, n * 4);
    float *gg = be_dup(gpu, g, n * 4), *gu = be_dup(gpu, u, n * 4), *gd = be_dup(gpu, d, n * 4);
    float *co = cpu->ops->alloc(cpu, n * 4), *go = gpu->ops->alloc(gpu, n * 4);
    float *cdg = cpu->ops->alloc(cpu, n * 4), *gdg = gpu->ops->alloc(gpu, n * 4);
    float *cdu = cpu->ops->alloc(cpu, n * 4), *gdu = gpu->ops->alloc(gpu, n * 4);
    cpu->ops->swiglu_fwd(cpu, FT_DTYPE_F32, co, cg, cu, n);
    gpu->ops->swiglu_fwd(gpu, FT_DTYPE_F32, go, gg, gu, n);
    cpu->ops->swiglu_bwd(cpu, FT_DTYPE_F32, cdg, cdu, cd, cg, cu, n, NULL);
    gpu->ops->swiglu_bwd(gpu, FT_DTYPE_F32, gdg, gdu, gd, gg, gu, n, NULL);
    float *r1 = be_fetch(cpu, co, n * 4), *r2 = be_fetch(gpu, go, n * 4);
    close_enough("swiglu_fwd", r2, r1, n, 1e-5f);
    free(r1), free(r2);
    r1 = be_fetch(cpu, cdg, n * 4), r2 = be_fetch(gpu, gdg, n * 4);
    close_enough("swiglu_bwd dgate", r2, r1, n, 1e-5f);
    free(r1), free(r2);
    r1 = be_fetch(cpu, cdu, n * 4), r2 = be_fetch(gpu, gdu, n * 4);
    close_enough("swiglu_bwd dup", r2, r1, n, 1e-5f);
    free(r1), free(r2);
    void *cfree[] = {cg, cu, cd, co, cdg, cdu};
    void *gfree[] = {gg, gu, gd, go, gdg, gdu};
    for (int i = 0; i < 6; i++) {
        cpu->ops->free(cpu, cfree[i]);
        gpu->ops->free(gpu, gfree[i]);
    }
    free(g), free(u), free(d);
}

/* ---------------------------------------------------------------- embedding */

static void test_embedding_case(int vocab, int dim, int tokens)
{
    char what[128];
    size_t nt = (size_t)vocab * dim, no = (size_t)tokens * dim;
    float *table = host_random(nt, -1, 1), *dout = host_random(no, -1, 1);
    float *dtab0 = host_random(nt, -1, 1);
    int32_t *ids = xmalloc((size_t)tokens * 4);
    for (int t = 0; t < tokens; t++) /* skewed: low ids repeat a lot */
        ids[t] = (int32_t)((rng_u32() % (uint32_t)vocab) * (rng_u32() % 2u ? 1u : 0u));
    float *ct = be_dup(cpu, table, nt * 4), *gt = be_dup(gpu, table, nt * 4);
    int32_t *ci = be_dup(cpu, ids, (size_t)tokens * 4), *gi = be_dup(gpu, ids, (size_t)tokens * 4);
    float *co = cpu->ops->alloc(cpu, no * 4), *go = gpu->ops->alloc(gpu, no * 4);
    cpu->ops->embedding_fwd(cpu, FT_DTYPE_F32, co, ct, ci, tokens, dim);
    gpu->ops->embedding_fwd(gpu, FT_DTYPE_F32, go, gt, gi, tokens, dim);
    float *r1 = be_fetch(cpu, co, no * 4), *r2 = be_fetch(gpu, go, no * 4);
    snprintf(what, sizeof what, "embedding_fwd vocab=%d dim=%d tokens=%d", vocab, dim, tokens);
    bitwise(what, r2, r1, no * 4);
    free(r1), free(r2);

    float *cdo = be_dup(cpu, dout, no * 4), *gdo = be_dup(gpu, dout, no * 4);
    float *cdt = be_dup(cpu, dtab0, nt * 4), *gdt = be_dup(gpu, dtab0, nt * 4);
    cpu->ops->embedding_bwd(cpu, FT_DTYPE_F32, FT_DTYPE_F32, cdt, cdo, ci, tokens, dim);
    gpu->ops->embedding_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, gdt, gdo, gi, tokens, dim);
    r1 = be_fetch(cpu, cdt, nt * 4), r2 = be_fetch(gpu, gdt, nt * 4);
    snprintf(what, sizeof what, "embedding_bwd (accumulate) vocab=%d dim=%d tokens=%d", vocab, dim,
             tokens);
    close_enough(what, r2, r1, nt, 1e-5f);
    snprintf(what, sizeof what, "embedding_bwd vocab=%d dim=%d tokens=%d bitwise (token order)",
             vocab, dim, tokens);
    bitwise(what, r2, r1, nt * 4);
    free(r1), free(r2);
    cpu->ops->free(cpu, ct), cpu->ops->free(cpu, ci), cpu->ops->free(cpu, co);
    cpu->ops->free(cpu, cdo), cpu->ops->free(cpu, cdt);
    gpu->ops->free(gpu, gt), gpu->ops->free(gpu, gi), gpu->ops->free(gpu, go);
    gpu->ops->free(gpu, gdo), gpu->ops->free(gpu, gdt);
    free(table), free(dout), free(dtab0), free(ids);
}

/* ---------------------------------------------------------------- cross-entropy */

static void test_cross_entropy_case(int rows, int vocab, int with_weight)
{
    char what[128];
    size_t n = (size_t)rows * vocab;
    float *z = host_random(n, -6, 6);
    int32_t *tg = xmalloc((size_t)rows * 4);
    float *w = xmalloc((size_t)rows * 4);
    for (int r = 0; r < rows; r++) {
        w[r] = r % 3 == 2 ? 0.0f : rng_uniform(0.5f, 2.0f);
        /* Rows with weight 0 carry an invalid target: it must not be read. */
        tg[r] = with_weight && w[r] == 0.0f ? -12345 : (int32_t)(rng_u32() % (uint32_t)vocab);
    }
    float *cz = be_dup(cpu, z, n * 4), *gz = be_dup(gpu, z, n * 4);
    int32_t *ctg = be_dup(cpu, tg, (size_t)rows * 4), *gtg = be_dup(gpu, tg, (size_t)rows * 4);
    float *cw = with_weight ? be_dup(cpu, w, (size_t)rows * 4) : NULL;
    float *gw = with_weight ? be_dup(gpu, w, (size_t)rows * 4) : NULL;
    float *cl = cpu->ops->alloc(cpu, (size_t)rows * 4), *gl = gpu->ops->alloc(gpu, (size_t)rows * 4);
    /* bf16 dlogits first (the logits are still intact): each backend's must be the bits of
     * its own fp32 dlogits (the in-place call below) rounded by its f32_to_bf16 */
    uint16_t *c16 = cpu->ops->alloc(cpu, n * 2), *g16 = gpu->ops->alloc(gpu, n * 2);
    cpu->ops->cross_entropy(cpu, cz, FT_DTYPE_F32, c16, FT_DTYPE_BF16, cl, ctg, cw, rows, vocab,
                            0.25f);
    gpu->ops->cross_entropy(gpu, gz, FT_DTYPE_F32, g16, FT_DTYPE_BF16, gl, gtg, gw, rows, vocab,
                            0.25f);
    float *l16c = be_fetch(cpu, cl, (size_t)rows * 4), *l16g = be_fetch(gpu, gl, (size_t)rows * 4);
    cpu->ops->cross_entropy(cpu, cz, FT_DTYPE_F32, cz, FT_DTYPE_F32, cl, ctg, cw, rows, vocab,
                            0.25f);
    gpu->ops->cross_entropy(gpu, gz, FT_DTYPE_F32, gz, FT_DTYPE_F32, gl, gtg, gw, rows, vocab,
                            0.25f);
    for (int side = 0; side < 2; side++) {
        ft_backend *be = side ? gpu : cpu;
        uint16_t *direct = side ? g16 : c16, *cast = be->ops->alloc(be, n * 2);
        be->ops->f32_to_bf16(be, cast, side ? gz : cz, n);
        void *a = be_fetch(be, direct, n * 2), *b = be_fetch(be, cast, n * 2);
        void *la = side ? l16g : l16c, *lb = be_fetch(be, side ? gl : cl, (size_t)rows * 4);
        snprintf(what, sizeof what, "cross_entropy %s bf16 dlogits == cast of fp32, rows=%d",
                 be->name, rows);
        bitwise(what, a, b, n * 2);
        snprintf(what, sizeof what, "cross_entropy %s loss with bf16 dlogits == with fp32, rows=%d",
                 be->name, rows);
        bitwise(what, la, lb, (size_t)rows * 4);
        be->ops->free(be, cast), be->ops->free(be, direct);
        free(a), free(b), free(lb);
    }
    free(l16c), free(l16g);
    float *r1 = be_fetch(cpu, cz, n * 4), *r2 = be_fetch(gpu, gz, n * 4);
    snprintf(what, sizeof what, "cross_entropy dlogits rows=%d vocab=%d weight=%s", rows, vocab,
             with_weight ? "yes" : "NULL");
    close_enough(what, r2, r1, n, 1e-4f);
    free(r1), free(r2);
    r1 = be_fetch(cpu, cl, (size_t)rows * 4), r2 = be_fetch(gpu, gl, (size_t)rows * 4);
    snprintf(what, sizeof what, "cross_entropy loss rows=%d vocab=%d weight=%s", rows, vocab,
             with_weight ? "yes" : "NULL");
    close_enough(what, r2, r1, (size_t)rows, 1e-4f);
    free(r1), free(r2);
    cpu->ops->free(cpu, cz), cpu->ops->free(cpu, ctg), cpu->ops->free(cpu, cl);
    gpu->ops->free(gpu, gz), gpu->ops->free(gpu, gtg), gpu->ops->free(gpu, gl);
    if (cw)
        cpu->ops->free(cpu, cw);
    if (gw)
        gpu->ops->free(gpu, gw);
    free(z), free(tg), free(w);
}

/* bf16 logits (the bf16 recipe's head): on each backend the bits of its own fp32 op on
 * the widened logits, for bf16 dlogits in place and fp32 dlogits elsewhere; the GPU's
 * close to the CPU's. */
static void test_cross_entropy_bf16_logits(int rows, int vocab)
{
    char what[160];
    const size_t n = (size_t)rows * vocab;
    float *z = host_random(n, -6, 6);
    uint16_t *bits = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        bits[i] = ft_f32_to_bf16(z[i]);
        z[i] = ft_bf16_to_f32(bits[i]);
    }
    int32_t *tg = xmalloc((size_t)rows * 4);
    float *w = xmalloc((size_t)rows * 4);
    for (int r = 0; r < rows; r++) {
        w[r] = r % 4 == 1 ? 0.0f : 1.0f;
        tg[r] = w[r] == 0.0f ? -7 : (int32_t)(rng_u32() % (uint32_t)vocab);
    }
    float *got[2][2]; /* [backend][bf16 in place, fp32 elsewhere] as fp32 */
    float *loss[2];
    for (int side = 0; side < 2; side++) {
        ft_backend *be = side ? gpu : cpu;
        float *wide = be_dup(be, z, n * 4), *out32 = be->ops->alloc(be, n * 4);
        uint16_t *z16 = be_dup(be, bits, n * 2), *ref16 = be->ops->alloc(be, n * 2);
        int32_t *dt = be_dup(be, tg, (size_t)rows * 4);
        float *dw = be_dup(be, w, (size_t)rows * 4), *l = be->ops->alloc(be, (size_t)rows * 4);
        be->ops->cross_entropy(be, wide, FT_DTYPE_F32, ref16, FT_DTYPE_BF16, l, dt, dw, rows,
                               vocab, 0.5f);
        float *ref_loss = be_fetch(be, l, (size_t)rows * 4);
        be->ops->cross_entropy(be, wide, FT_DTYPE_F32, wide, FT_DTYPE_F32, l, dt, dw, rows, vocab,
                               0.5f);
        be->ops->cross_entropy(be, z16, FT_DTYPE_BF16, out32, FT_DTYPE_F32, l, dt, dw, rows, vocab,
                               0.5f);
        void *a = be_fetch(be, out32, n * 4), *b = be_fetch(be, wide, n * 4);
        snprintf(what, sizeof what, "cross_entropy %s bf16 logits, fp32 dlogits == of the "
                 "widened logits, rows=%d vocab=%d", be->name, rows, vocab);
        bitwise(what, a, b, n * 4);
        free(a), free(b);
        be->ops->cross_entropy(be, z16, FT_DTYPE_BF16, z16, FT_DTYPE_BF16, l, dt, dw, rows, vocab,
                               0.5f);
        a = be_fetch(be, z16, n * 2), b = be_fetch(be, ref16, n * 2);
        snprintf(what, sizeof what, "cross_entropy %s bf16 logits, bf16 dlogits in place == of "
                 "the widened logits, rows=%d vocab=%d", be->name, rows, vocab);
        bitwise(what, a, b, n * 2);
        loss[side] = be_fetch(be, l, (size_t)rows * 4);
        snprintf(what, sizeof what, "cross_entropy %s bf16 logits: loss == of the widened "
                 "logits, rows=%d", be->name, rows);
        bitwise(what, loss[side], ref_loss, (size_t)rows * 4);
        got[side][0] = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++)
            got[side][0][i] = ft_bf16_to_f32(((uint16_t *)a)[i]);
        got[side][1] = be_fetch(be, out32, n * 4);
        free(a), free(b), free(ref_loss);
        be->ops->free(be, wide), be->ops->free(be, out32), be->ops->free(be, z16);
        be->ops->free(be, ref16), be->ops->free(be, dt), be->ops->free(be, dw);
        be->ops->free(be, l);
    }
    snprintf(what, sizeof what, "cross_entropy bf16 logits: fp32 dlogits rows=%d vocab=%d", rows,
             vocab);
    close_enough(what, got[1][1], got[0][1], n, 1e-4f);
    snprintf(what, sizeof what, "cross_entropy bf16 logits: bf16 dlogits rows=%d vocab=%d", rows,
             vocab);
    close_enough(what, got[1][0], got[0][0], n, 1e-2f);
    snprintf(what, sizeof what, "cross_entropy bf16 logits: loss rows=%d vocab=%d", rows, vocab);
    close_enough(what, loss[1], loss[0], (size_t)rows, 1e-4f);
    for (int side = 0; side < 2; side++)
        free(got[side][0]), free(got[side][1]), free(loss[side]);
    free(z), free(bits), free(tg), free(w);
}

/* ---------------------------------------------------------------- optimisers */

static void test_optim(void)
{
    size_t n = 100003;
    float *p = host_random(n, -1, 1), *m = host_random(n, -0.1f, 0.1f);
    float *v = host_random(n, 0, 0.01f);
    float *cp = be_dup(cpu, p, n * 4), *cm = be_dup(cpu, m, n * 4), *cv = be_dup(cpu, v, n * 4);
    float *gp = be_dup(gpu, p, n * 4), *gm = be_dup(gpu, m, n * 4), *gv = be_dup(gpu, v, n * 4);
    uint16_t *cbits = cpu->ops->alloc(cpu, n * 2), *gbits = gpu->ops->alloc(gpu, n * 2);
    for (long step = 1; step <= 3; step++) {
        float *g = host_random(n, -1, 1);
        float *cg = be_dup(cpu, g, n * 4), *gg = be_dup(gpu, g, n * 4);
        /* step 2 clips: the multiplier applied in the update's read of g */
        ft_adamw_params ap = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, NULL,
                              step == 2 ? 0.3127f : 1.0f, 0, false};
        ap.bf16_out = step == 3 ? cbits : NULL; /* the last step also rounds to bf16 */
        ap.no_decay_from = step == 3 ? 70001 : 0; /* and exempts its tail from the decay */
        cpu->ops->adamw_step(cpu, cp, cg, cm, cv, n, &ap);
        ap.bf16_out = step == 3 ? gbits : NULL;
        gpu->ops->adamw_step(gpu, gp, gg, gm, gv, n, &ap);
        cpu->ops->free(cpu, cg), gpu->ops->free(gpu, gg);
        free(g);
    }
    const char *names[] = {"adamw param", "adamw m", "adamw v"};
    float *cbufs[] = {cp, cm, cv}, *gbufs[] = {gp, gm, gv};
    for (int i = 0; i < 3; i++) {
        char what[64];
        float *r1 = be_fetch(cpu, cbufs[i], n * 4), *r2 = be_fetch(gpu, gbufs[i], n * 4);
        snprintf(what, sizeof what, "%s (3 steps)", names[i]);
        close_enough(what, r2, r1, n, 1e-5f);
        snprintf(what, sizeof what, "%s (3 steps) bitwise", names[i]);
        bitwise(what, r2, r1, n * 4);
        free(r1), free(r2);
    }
    {
        uint16_t *b1 = (uint16_t *)be_fetch(cpu, cbits, n * 2);
        uint16_t *b2 = (uint16_t *)be_fetch(gpu, gbits, n * 2);
        bitwise("adamw bf16_out", b2, b1, n * 2);
        free(b1), free(b2);
        cpu->ops->free(cpu, cbits), gpu->ops->free(gpu, gbits);
    }
    { /* the bits of listed rows ahead of the update (the next lookup's), from the stored
         moments and from zeros unread; row 70 holds the no-decay split */
        enum { COLS = 1000, N_ROWS = 5 };
        const int32_t rows[N_ROWS] = { 99, 3, 70, 70, 0 };
        float *g = host_random(n, -1, 1);
        float *cg = be_dup(cpu, g, n * 4), *gg = be_dup(gpu, g, n * 4);
        int32_t *crows = be_dup(cpu, rows, sizeof rows), *grows = be_dup(gpu, rows, sizeof rows);
        uint16_t *cout = cpu->ops->alloc(cpu, N_ROWS * COLS * 2);
        uint16_t *gout = gpu->ops->alloc(gpu, N_ROWS * COLS * 2);
        for (int zero = 0; zero < 2; zero++) {
            ft_adamw_params ap = {5e-2f, 0.9f, 0.95f, 1e-8f, 1.0f, 4, NULL, 0.3127f, 70001, zero};
            cpu->ops->adamw_rows_bf16(cpu, cout, cp, cg, cm, cv, crows, N_ROWS, COLS, &ap);
            gpu->ops->adamw_rows_bf16(gpu, gout, gp, gg, gm, gv, grows, N_ROWS, COLS, &ap);
            uint16_t *b1 = (uint16_t *)be_fetch(cpu, cout, N_ROWS * COLS * 2);
            uint16_t *b2 = (uint16_t *)be_fetch(gpu, gout, N_ROWS * COLS * 2);
            bitwise(zero ? "adamw_rows_bf16 moments_zero" : "adamw_rows_bf16", b2, b1,
                    N_ROWS * COLS * 2);
            free(b1), free(b2);
        }
        cpu->ops->free(cpu, cg), gpu->ops->free(gpu, gg), cpu->ops->free(cpu, crows);
        gpu->ops->free(gpu, grows), cpu->ops->free(cpu, cout), gpu->ops->free(gpu, gout);
        free(g);
    }

    for (int with_mom = 0; with_mom < 2; with_mom++) {
        char what[64];
        float *g = host_random(n, -1, 1);
        float *cg = be_dup(cpu, g, n * 4), *gg = be_dup(gpu, g, n * 4);
        ft_sgd_params sp = {0.05f, with_mom ? 0.9f : 0.0f, 0.01f, 0.6143f, false};
        for (int step = 0; step < 2; step++) {
            cpu->ops->sgd_step(cpu, cp, cg, with_mom ? cm : NULL, n, &sp);
            gpu->ops->sgd_step(gpu, gp, gg, with_mom ? gm : NULL, n, &sp);
        }
        float *r1 = be_fetch(cpu, cp, n * 4), *r2 = be_fetch(gpu, gp, n * 4);
        snprintf(what, sizeof what, "sgd param momentum=%s", with_mom ? "0.9" : "0");
        close_enough(what, r2, r1, n, 1e-5f);
        snprintf(what, sizeof what, "sgd param momentum=%s bitwise", with_mom ? "0.9" : "0");
        bitwise(what, r2, r1, n * 4);
        free(r1), free(r2);
        cpu->ops->free(cpu, cg), gpu->ops->free(gpu, gg);
        free(g);
    }
    cpu->ops->free(cpu, cp), cpu->ops->free(cpu, cm), cpu->ops->free(cpu, cv);
    gpu->ops->free(gpu, gp), gpu->ops->free(gpu, gm), gpu->ops->free(gpu, gv);
    free(p), free(m), free(v);
}

/* ---------------------------------------------------------------- casts */

static void test_casts(void)
{
    size_t n = 70000;
    float *x = host_random(n, -1000, 1000);
    uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                           0xffc00001u, 0x7f800001u, 0x7fffffffu, 0x00000001u, 0x807fffffu,
                           0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f7f8000u,
                           0x00008000u, 0x00018000u};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        memcpy(&x[i], &specials[i], 4);
    for (size_t i = 100; i < 1100; i++) { /* random bit patterns, NaNs included */
        uint32_t u = rng_u32() ^ (rng_u32() << 16);
        memcpy(&x[i], &u, 4);
    }
    float *cx = be_dup(cpu, x, n * 4), *gx = be_dup(gpu, x, n * 4);
    uint16_t *cb = cpu->ops->alloc(cpu, n * 2), *gb = gpu->ops->alloc(gpu, n * 2);
    cpu->ops->f32_to_bf16(cpu, cb, cx, n);
    gpu->ops->f32_to_bf16(gpu, gb, gx, n);
    uint16_t *r1 = be_fetch(cpu, cb, n * 2), *r2 = be_fetch(gpu, gb, n * 2);
    bitwise("f32_to_bf16 (RNE, specials, NaN kept)", r2, r1, n * 2);
    float *cy = cpu->ops->alloc(cpu, n * 4), *gy = gpu->ops->alloc(gpu, n * 4);
    cpu->ops->bf16_to_f32(cpu, cy, cb, n);
    gpu->ops->bf16_to_f32(gpu, gy, gb, n);
    float *s1 = be_fetch(cpu, cy, n * 4), *s2 = be_fetch(gpu, gy, n * 4);
    bitwise("bf16_to_f32", s2, s1, n * 4);
    cpu->ops->free(cpu, cx), cpu->ops->free(cpu, cb), cpu->ops->free(cpu, cy);
    gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gb), gpu->ops->free(gpu, gy);
    free(x), free(r1), free(r2), free(s1), free(s2);
}

/* ---------------------------------------------------------------- main */

int main(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
        return 77;
    }
    const char *dev_env = getenv("FT_CUDA_TEST_DEVICE");
    int device = dev_env ? atoi(dev_env) : 0;
    ft_error err;
    ft_error_clear(&err);
    if (ft_backend_cpu_create(&cpu, &err) != 0) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        return 1;
    }
    if (ft_backend_cuda_create(&gpu, device, &err) != 0) {
        fprintf(stderr, "cuda backend: %s\n", err.msg);
        return 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
        printf("device %d: %s (sm_%d%d)\n", device, prop.name, prop.major, prop.minor);

    test_memory();
    test_host_copies();
    test_matmul();
    test_vector_ops();
    test_rmsnorm_case(1, 1);
    test_rmsnorm_case(37, 96);
    test_rmsnorm_case(300, 4096);
    /* the backward's paths (cuda_rmsnorm.cu): dx and dw partials in one kernel with one and
     * two 8-value groups a thread; a row too wide for it (dx, then dw partials over
     * 128-row chunks); one value at a time (dim not a multiple of 8), several chunks */
    test_rmsnorm_case(40, 8192);
    test_rmsnorm_case(20, 16384);
    test_rmsnorm_case(150, 100);
    test_rope_case(13, 3, 16, 16, 0);
    test_rope_case(130, 4, 64, 64, 0);
    test_rope_case(7, 2, 128, 128, 0);
    test_rope_case(11, 3, 64, 16, 0);   /* GPT-NeoX (Pythia): rotary_pct 0.25 */
    test_rope_case(9, 2, 20, 6, 0);     /* an odd number of pairs */
    test_rope_case(10, 2, 256, 64, 1);  /* GPT-J: rotary_dim 64, rotate_every_two */
    test_rope_case(5, 3, 16, 16, 1);
    test_layernorm_case(1, 1);
    test_layernorm_case(1, 77);
    test_layernorm_case(37, 96);
    test_layernorm_case(300, 2560);     /* Pythia-2.8b width; 3 row chunks of dw/db */
    /* the backward's paths (cuda_layernorm.cu): fused with one and two 8-value groups a
     * thread, a row too wide for it, one value at a time over several 128-row chunks */
    test_layernorm_case(40, 8192);
    test_layernorm_case(20, 16384);
    test_layernorm_case(150, 100);
    test_gelu_case(1, FT_GELU_ERF);
    test_gelu_case(100003, FT_GELU_ERF);
    test_gelu_case(100003, FT_GELU_TANH);
    test_gelu_tail(FT_GELU_ERF);
    test_gelu_tail(FT_GELU_TANH);
    test_rmsnorm_case(13 * 4, 24); /* qwen3's per-head q/k norm: tokens x heads rows */
    test_attention();
    test_bias_case(1, 3);
    test_bias_case(300, 896);
    test_bias_case(4097, 130);
    test_swiglu();
    test_embedding_case(50, 130, 300);
    test_embedding_case(1000, 64, 5000);
    test_embedding_case(7, 4096, 3);
    test_cross_entropy_case(9, 1000, 1);
    test_cross_entropy_case(4, 50000, 1);
    test_cross_entropy_case(5, 3, 0);
    test_cross_entropy_bf16_logits(5, 50000); /* 16-byte loads */
    test_cross_entropy_bf16_logits(9, 1003);  /* one logit at a time */
    test_optim();
    test_casts();

    gpu->ops->sync(gpu);
    report("no allocation leaked", gpu->bytes_in_use == 0, "%zu bytes in use", gpu->bytes_in_use);
    ft_backend_destroy(gpu);
    ft_backend_destroy(cpu);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
