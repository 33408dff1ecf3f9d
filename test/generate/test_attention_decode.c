/* The backend's attention_decode (queries of new positions against a K/V cache):
 *  - CPU against a naive double-precision reference, over shapes with GQA groups
 *    1, 2 and 4, empty and long caches, one and several new tokens, head_dim odd
 *    and even; out is pre-filled with NaN to check it is overwritten;
 *  - CPU against the trainer's flash-attention forward on the whole sequence, at
 *    the new rows (what cached decoding relies on);
 *  - the same with a sliding window (Mistral) of 1, 5 and 64 keys, shorter and
 *    longer than the cache;
 *  - CUDA against CPU when the build has CUDA and the machine a GPU (else skipped).
 * Tolerance: |err| <= 2e-5 * max|ref| + 1e-6 (fp32 sums over up to ~300 keys). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "config.h"
#include "util/rng.h"

#define REL 2e-5
#define ABS 1e-6

typedef struct shape {
    int past, n_new, n_heads, n_kv, hd, window; /* window 0: none */
} shape;

static const shape shapes[] = {
    { 0, 1, 1, 1, 4, 0 },   { 0, 1, 4, 2, 8, 0 },    { 7, 1, 4, 2, 8, 0 },   { 5, 3, 4, 1, 16, 0 },
    { 0, 17, 8, 2, 16, 0 }, { 130, 1, 8, 8, 32, 0 }, { 63, 66, 4, 2, 5, 0 }, { 200, 4, 6, 3, 64, 0 },
    { 300, 1, 2, 1, 128, 0 },
    { 9, 3, 4, 2, 8, 5 },  { 0, 17, 4, 2, 16, 5 }, { 130, 2, 8, 2, 32, 64 },
    { 3, 2, 2, 1, 8, 1 },  { 2, 1, 2, 2, 8, 64 },
};

static float *rand_buf(size_t n, uint64_t seed, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(scale * (2.0 * ft_rng_uniform(seed, 11, i) - 1.0));
    return p;
}

/* o_i = softmax_j (q_i.k_j / sqrt(hd)) v_j in double, over past+i-window < j <=
 * past+i (no lower bound without a window). */
static void ref_decode(double *out, const float *q, const float *k, const float *v, shape s)
{
    const int group = s.n_heads / s.n_kv;
    const size_t qs = (size_t)s.n_heads * s.hd, ks = (size_t)s.n_kv * s.hd;
    const double scale = 1.0 / sqrt((double)s.hd);
    const int L = s.past + s.n_new;
    double *sc = malloc((size_t)L * sizeof *sc);
    for (int i = 0; i < s.n_new; i++)
        for (int h = 0; h < s.n_heads; h++) {
            const int g = h / group, nk = s.past + i + 1;
            const int j0 = s.window > 0 && nk - s.window > 0 ? nk - s.window : 0;
            const float *qi = q + i * qs + (size_t)h * s.hd;
            double m = -INFINITY, l = 0.0;
            for (int j = 0; j < j0; j++)
                sc[j] = -INFINITY; /* exp(-inf - m) = 0: outside the window */
            for (int j = j0; j < nk; j++) {
                double d = 0.0;
                for (int c = 0; c < s.hd; c++)
                    d += (double)qi[c] * k[j * ks + (size_t)g * s.hd + c];
                sc[j] = d * scale;
                m = sc[j] > m ? sc[j] : m;
            }
            for (int j = 0; j < nk; j++)
                l += (sc[j] = exp(sc[j] - m));
            double *o = out + i * qs + (size_t)h * s.hd;
            for (int c = 0; c < s.hd; c++) {
                double acc = 0.0;
                for (int j = 0; j < nk; j++)
                    acc += sc[j] * v[j * ks + (size_t)g * s.hd + c];
                o[c] = acc / l;
            }
        }
    free(sc);
}

/* Runs the op on backend be with host inputs; returns the host output. */
static float *run_decode(ft_backend *be, const float *q, const float *k, const float *v, shape s)
{
    const size_t nq = (size_t)s.n_new * s.n_heads * s.hd;
    const size_t nkv = (size_t)(s.past + s.n_new) * s.n_kv * s.hd;
    float *dq = be->ops->alloc(be, nq * sizeof(float));
    float *dk = be->ops->alloc(be, nkv * sizeof(float));
    float *dv = be->ops->alloc(be, nkv * sizeof(float));
    float *dout = be->ops->alloc(be, nq * sizeof(float));
    float *out = malloc(nq * sizeof(float));
    for (size_t i = 0; i < nq; i++)
        out[i] = NAN;
    be->ops->upload(be, dq, q, nq * sizeof(float));
    be->ops->upload(be, dk, k, nkv * sizeof(float));
    be->ops->upload(be, dv, v, nkv * sizeof(float));
    be->ops->upload(be, dout, out, nq * sizeof(float));
    be->ops->attention_decode(be, FT_DTYPE_F32, dout, dq, dk, dv, s.past, s.n_new, s.n_heads, s.n_kv, s.hd,
                              s.window);
    be->ops->download(be, out, dout, nq * sizeof(float));
    be->ops->sync(be);
    be->ops->free(be, dq);
    be->ops->free(be, dk);
    be->ops->free(be, dv);
    be->ops->free(be, dout);
    return out;
}

static void make_inputs(shape s, uint64_t seed, float **q, float **k, float **v)
{
    const size_t nq = (size_t)s.n_new * s.n_heads * s.hd;
    const size_t nkv = (size_t)(s.past + s.n_new) * s.n_kv * s.hd;
    *q = rand_buf(nq, seed, 2.0f); /* sharp enough softmaxes to matter */
    *k = rand_buf(nkv, seed + 1, 1.0f);
    *v = rand_buf(nkv, seed + 2, 1.0f);
}

static void expect_close_d(const float *got, const double *want, size_t n, const char *what)
{
    double mx = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
        double e = fabs((double)got[i] - want[i]);
        err = isnan(got[i]) ? INFINITY : (e > err ? e : err);
    }
    if (!(err <= REL * mx + ABS)) {
        fprintf(stderr, "%s: max error %.3g (max |ref| %.3g)\n", what, err, mx);
        fail();
    }
}

static void test_cpu_vs_reference(void **state)
{
    ft_backend *be;
    ft_error err;
    assert_int_equal(ft_backend_cpu_create(&be, &err), 0);
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        shape s = shapes[t];
        float *q, *k, *v;
        make_inputs(s, 100 + t, &q, &k, &v);
        const size_t nq = (size_t)s.n_new * s.n_heads * s.hd;
        double *want = malloc(nq * sizeof *want);
        ref_decode(want, q, k, v, s);
        float *got = run_decode(be, q, k, v, s);
        char what[128];
        snprintf(what, sizeof what, "past=%d new=%d heads=%d/%d hd=%d window=%d", s.past,
                 s.n_new, s.n_heads, s.n_kv, s.hd, s.window);
        expect_close_d(got, want, nq, what);
        free(q), free(k), free(v), free(want), free(got);
    }
    ft_backend_destroy(be);
}

/* attention_fwd over all past+n_new tokens, rows past.. == attention_decode. */
static void test_cpu_vs_flash(void **state)
{
    ft_backend *be;
    ft_error err;
    assert_int_equal(ft_backend_cpu_create(&be, &err), 0);
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        shape s = shapes[t];
        const int T = s.past + s.n_new;
        const size_t qs = (size_t)s.n_heads * s.hd;
        float *qall = rand_buf((size_t)T * qs, 500 + t, 2.0f), *k, *v, *qn;
        make_inputs(s, 700 + t, &qn, &k, &v);
        free(qn);
        const float *q_new = qall + (size_t)s.past * qs;
        float *dec = run_decode(be, q_new, k, v, s);
        float *flash = malloc((size_t)T * qs * sizeof(float));
        float *lse = malloc((size_t)T * s.n_heads * sizeof(float));
        ft_attn_shape as = { .batch = 1, .seq_len = T, .n_heads = s.n_heads,
                             .n_kv_heads = s.n_kv, .head_dim = s.hd, .window = s.window };
        be->ops->attention_fwd(be, FT_DTYPE_F32, flash, lse, qall, k, v, NULL, as);
        double *want = malloc((size_t)s.n_new * qs * sizeof *want);
        for (size_t i = 0; i < (size_t)s.n_new * qs; i++)
            want[i] = flash[(size_t)s.past * qs + i];
        expect_close_d(dec, want, (size_t)s.n_new * qs, "decode vs flash forward");
        free(qall), free(k), free(v), free(dec), free(flash), free(lse), free(want);
    }
    ft_backend_destroy(be);
}

static void test_cuda_vs_cpu(void **state)
{
#ifdef FT_HAVE_CUDA
    ft_backend *cpu, *gpu;
    ft_error err;
    assert_int_equal(ft_backend_cpu_create(&cpu, &err), 0);
    if (ft_backend_cuda_create(&gpu, 0, &err) != 0) {
        ft_backend_destroy(cpu);
        skip();
    }
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        shape s = shapes[t];
        float *q, *k, *v;
        make_inputs(s, 900 + t, &q, &k, &v);
        const size_t nq = (size_t)s.n_new * s.n_heads * s.hd;
        double *want = malloc(nq * sizeof *want);
        ref_decode(want, q, k, v, s);
        float *got = run_decode(gpu, q, k, v, s);
        expect_close_d(got, want, nq, "cuda attention_decode vs reference");
        free(q), free(k), free(v), free(want), free(got);
    }
    ft_backend_destroy(gpu);
    ft_backend_destroy(cpu);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_vs_reference),
        cmocka_unit_test(test_cpu_vs_flash),
        cmocka_unit_test(test_cuda_vs_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
