/* CPU flash attention against the naive double-precision reference (ref_ops.c)
 * and against central finite differences.
 *
 * Tolerances (fp32 kernel vs double reference, max over all elements):
 *  - out, dq, dk, dv: |err| <= 2e-5 * max|ref| + 1e-6
 *    (fp32 rounding of sums over up to 130 keys and 128 dims measures ~1e-6..5e-6)
 *  - lse:             |err| <= 1e-5 * max|ref| + 1e-5
 *  - FD gradients:    |err| <= 1e-4 * max|g| + 1e-6  (FD itself is good to ~1e-9)
 *  - documents alone vs packed: same as against the reference.
 * Every comparison runs for each instruction-set variant the CPU has (generic,
 * AVX2, AVX-512); outputs are pre-filled with NaN to check they are overwritten. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "backend/cpu/cpu_internal.h"
#include "backend_test_util.h"
#include "ref_ops.h"

#define ATTN_REL 2e-5
#define ATTN_ABS 1e-6
#define LSE_REL 1e-5
#define LSE_ABS 1e-5
#define FD_REL 1e-4
#define FD_ABS 1e-6

static const char *const isa_names[] = {"generic", "avx2", "avx512"};

/* The backends to test: one per distinct ISA variant the machine supports. */
static int make_backends(ft_backend **out)
{
    int n = 0;
    for (int i = 0; i < 3; i++) {
        ft_backend *be = bt_backend_create_isa(isa_names[i]);
        if ((int)ft_cpu_isa_of(be) != i) {
            ft_backend_destroy(be); /* not available here */
            continue;
        }
        out[n++] = be;
    }
    return n;
}

typedef enum seg_kind { SEG_NONE, SEG_DOCS, SEG_SCATTERED } seg_kind;

/* Packed documents: increasing ids per row, lengths 1 (often) to T/3. */
static int32_t *make_segments(bt_rng *r, int B, int T, seg_kind kind)
{
    if (kind == SEG_NONE)
        return NULL;
    int32_t *seg = malloc((size_t)B * T * sizeof *seg);
    for (int b = 0; b < B; b++) {
        int32_t id = 7 + 100 * b;
        int left = 0;
        for (int t = 0; t < T; t++) {
            if (kind == SEG_SCATTERED) { /* ids repeat non-contiguously */
                seg[(size_t)b * T + t] = bt_rng_int(r, 3);
                continue;
            }
            if (left == 0) {
                id++;
                left = bt_rng_int(r, 4) == 0 ? 1 : 1 + bt_rng_int(r, T / 3 + 1);
            }
            seg[(size_t)b * T + t] = id;
            left--;
        }
    }
    return seg;
}

typedef struct attn_data {
    ft_attn_shape s;
    size_t nq, nkv, nlse;
    float *q, *k, *v, *dout;
    int32_t *seg;
} attn_data;

static attn_data attn_data_make(ft_attn_shape s, seg_kind kind, uint64_t seed, float amp)
{
    attn_data d;
    bt_rng r = bt_rng_make(seed);
    d.s = s;
    d.nq = (size_t)s.batch * s.seq_len * s.n_heads * s.head_dim;
    d.nkv = (size_t)s.batch * s.seq_len * s.n_kv_heads * s.head_dim;
    d.nlse = (size_t)s.batch * s.n_heads * s.seq_len;
    d.q = malloc(d.nq * sizeof(float));
    d.k = malloc(d.nkv * sizeof(float));
    d.v = malloc(d.nkv * sizeof(float));
    d.dout = malloc(d.nq * sizeof(float));
    bt_fill_uniform(d.q, d.nq, &r, -amp, amp);
    bt_fill_uniform(d.k, d.nkv, &r, -amp, amp);
    bt_fill_uniform(d.v, d.nkv, &r, -1.0f, 1.0f);
    bt_fill_uniform(d.dout, d.nq, &r, -1.0f, 1.0f);
    d.seg = make_segments(&r, s.batch, s.seq_len, kind);
    return d;
}

static void attn_data_free(attn_data *d)
{
    free(d->q), free(d->k), free(d->v), free(d->dout), free(d->seg);
}

typedef struct attn_result {
    float *out, *lse, *dq, *dk, *dv;
} attn_result;

static void attn_result_free(attn_result *r)
{
    free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

static float *nan_filled(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

/* Forward and backward on the backend, through its memory ops. */
static attn_result attn_run(ft_backend *be, const attn_data *d)
{
    attn_result res;
    res.out = nan_filled(d->nq), res.lse = nan_filled(d->nlse), res.dq = nan_filled(d->nq);
    res.dk = nan_filled(d->nkv), res.dv = nan_filled(d->nkv);
    float *q = bt_upload(be, d->q, d->nq), *k = bt_upload(be, d->k, d->nkv);
    float *v = bt_upload(be, d->v, d->nkv), *dout = bt_upload(be, d->dout, d->nq);
    float *out = bt_upload(be, res.out, d->nq), *lse = bt_upload(be, res.lse, d->nlse);
    float *dq = bt_upload(be, res.dq, d->nq), *dk = bt_upload(be, res.dk, d->nkv);
    float *dv = bt_upload(be, res.dv, d->nkv);
    int32_t *seg = d->seg ? bt_upload_i32(be, d->seg, (size_t)d->s.batch * d->s.seq_len) : NULL;
    be->ops->attention_fwd(be, FT_DTYPE_F32, out, lse, q, k, v, seg, d->s);
    be->ops->attention_bwd(be, FT_DTYPE_F32, dq, dk, dv, dout, out, lse, q, k, v, seg, d->s);
    bt_download(be, res.out, out, d->nq), bt_download(be, res.lse, lse, d->nlse);
    bt_download(be, res.dq, dq, d->nq), bt_download(be, res.dk, dk, d->nkv);
    bt_download(be, res.dv, dv, d->nkv);
    void *bufs[] = {q, k, v, dout, out, lse, dq, dk, dv, seg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    return res;
}

typedef struct attn_ref {
    double *out, *lse, *dq, *dk, *dv;
} attn_ref;

static attn_ref attn_ref_make(const attn_data *d)
{
    attn_ref r;
    double *q = bt_to_double(d->q, d->nq), *k = bt_to_double(d->k, d->nkv);
    double *v = bt_to_double(d->v, d->nkv), *dout = bt_to_double(d->dout, d->nq);
    r.out = malloc(d->nq * sizeof(double)), r.lse = malloc(d->nlse * sizeof(double));
    r.dq = malloc(d->nq * sizeof(double)), r.dk = malloc(d->nkv * sizeof(double));
    r.dv = malloc(d->nkv * sizeof(double));
    ref_attention_fwd(r.out, r.lse, q, k, v, d->seg, d->s);
    ref_attention_bwd(r.dq, r.dk, r.dv, dout, q, k, v, d->seg, d->s);
    free(q), free(k), free(v), free(dout);
    return r;
}

static void attn_ref_free(attn_ref *r)
{
    free(r->out), free(r->lse), free(r->dq), free(r->dk), free(r->dv);
}

static bool attn_matches_ref(const char *label, const attn_result *got, const attn_ref *want,
                             const attn_data *d)
{
    char what[160];
    bool ok = true;
#define CHECK(field, n, rel, abs_)                                                                \
    snprintf(what, sizeof what, "%s " #field, label);                                            \
    ok &= bt_close(what, got->field, want->field, n, rel, abs_)
    CHECK(out, d->nq, ATTN_REL, ATTN_ABS);
    CHECK(lse, d->nlse, LSE_REL, LSE_ABS);
    CHECK(dq, d->nq, ATTN_REL, ATTN_ABS);
    CHECK(dk, d->nkv, ATTN_REL, ATTN_ABS);
    CHECK(dv, d->nkv, ATTN_REL, ATTN_ABS);
#undef CHECK
    return ok;
}

/* Tiled == naive over sequence lengths that do and do not divide the 64-wide
 * tiles, head sizes 16/64/128, MHA and GQA, with and without documents. */
static void test_tiled_matches_naive(void **state)
{
    (void)state;
    ft_backend *bes[3];
    int nbe = make_backends(bes);
    const int seqs[] = {1, 7, 63, 65, 130};
    const int hds[] = {16, 64, 128};
    const int heads[][2] = {{4, 4}, {8, 2}};
    const seg_kind kinds[] = {SEG_NONE, SEG_DOCS};
    bool ok = true;
    int cases = 0;
    uint64_t seed = 1;
    for (size_t a = 0; a < sizeof seqs / sizeof *seqs; a++)
        for (size_t b = 0; b < sizeof hds / sizeof *hds; b++)
            for (size_t c = 0; c < 2; c++)
                for (size_t e = 0; e < 2; e++) {
                    ft_attn_shape s = {2, seqs[a], heads[c][0], heads[c][1], hds[b], 0};
                    attn_data d = attn_data_make(s, kinds[e], seed++, 1.5f);
                    attn_ref ref = attn_ref_make(&d);
                    for (int i = 0; i < nbe; i++) {
                        char label[128];
                        snprintf(label, sizeof label, "[%s T=%d hd=%d nh=%d nkv=%d %s]",
                                 isa_names[ft_cpu_isa_of(bes[i])], s.seq_len, s.head_dim,
                                 s.n_heads, s.n_kv_heads, kinds[e] == SEG_DOCS ? "docs" : "causal");
                        attn_result res = attn_run(bes[i], &d);
                        ok &= attn_matches_ref(label, &res, &ref, &d);
                        attn_result_free(&res);
                        cases++;
                    }
                    attn_ref_free(&ref);
                    attn_data_free(&d);
                }
    fprintf(stderr, "  tiled vs naive: %d cases over %d ISA variant(s)\n", cases, nbe);
    for (int i = 0; i < nbe; i++)
        ft_backend_destroy(bes[i]);
    assert_true(ok);
}

/* Sliding window (Mistral) == naive attention with the window mask: windows of
 * 1 (only itself), smaller than a tile, one tile, across tile edges and longer
 * than the sequence, with and without documents; T = 200 and window 5 skip most
 * key tiles, so the skipping is checked as well as the element-wise mask. */
static void test_sliding_window_matches_naive(void **state)
{
    (void)state;
    ft_backend *bes[3];
    int nbe = make_backends(bes);
    const int seqs[] = {7, 65, 130, 200};
    const int windows[] = {1, 5, 64, 70, 500};
    const seg_kind kinds[] = {SEG_NONE, SEG_DOCS};
    bool ok = true;
    int cases = 0;
    uint64_t seed = 4000;
    for (size_t a = 0; a < sizeof seqs / sizeof *seqs; a++)
        for (size_t w = 0; w < sizeof windows / sizeof *windows; w++)
            for (size_t e = 0; e < 2; e++) {
                ft_attn_shape s = {2, seqs[a], 4, 2, 16, windows[w]};
                attn_data d = attn_data_make(s, kinds[e], seed++, 1.5f);
                attn_ref ref = attn_ref_make(&d);
                for (int i = 0; i < nbe; i++) {
                    char label[128];
                    snprintf(label, sizeof label, "[%s T=%d window=%d %s]",
                             isa_names[ft_cpu_isa_of(bes[i])], s.seq_len, s.window,
                             kinds[e] == SEG_DOCS ? "docs" : "causal");
                    attn_result res = attn_run(bes[i], &d);
                    ok &= attn_matches_ref(label, &res, &ref, &d);
                    attn_result_free(&res);
                    cases++;
                }
                attn_ref_free(&ref);
                attn_data_free(&d);
            }
    fprintf(stderr, "  sliding window vs naive: %d cases over %d ISA variant(s)\n", cases, nbe);
    for (int i = 0; i < nbe; i++)
        ft_backend_destroy(bes[i]);
    assert_true(ok);
}

/* Segment ids that repeat non-contiguously, large scores (peaked softmax: |s|
 * up to ~100), a single row. */
static void test_scattered_ids_and_large_scores(void **state)
{
    (void)state;
    ft_backend *bes[3];
    int nbe = make_backends(bes);
    bool ok = true;
    struct {
        ft_attn_shape s;
        seg_kind kind;
        float amp;
    } cases[] = {
        {{1, 130, 4, 2, 64, 0}, SEG_SCATTERED, 1.0f},
        {{3, 97, 2, 1, 32, 0}, SEG_SCATTERED, 1.0f},
        {{2, 130, 4, 1, 64, 0}, SEG_DOCS, 5.0f},
        {{1, 200, 2, 2, 128, 0}, SEG_NONE, 4.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        attn_data d = attn_data_make(cases[c].s, cases[c].kind, 100 + c, cases[c].amp);
        attn_ref ref = attn_ref_make(&d);
        for (int i = 0; i < nbe; i++) {
            char label[96];
            snprintf(label, sizeof label, "[%s case %zu]", isa_names[ft_cpu_isa_of(bes[i])], c);
            attn_result res = attn_run(bes[i], &d);
            ok &= attn_matches_ref(label, &res, &ref, &d);
            attn_result_free(&res);
        }
        attn_ref_free(&ref);
        attn_data_free(&d);
    }
    for (int i = 0; i < nbe; i++)
        ft_backend_destroy(bes[i]);
    assert_true(ok);
}

/* Finite differences of L = sum r o attention(q, k, v) in double against the
 * backend's fp32 gradients (dout = r). */
typedef struct attn_fd_ctx {
    ft_attn_shape s;
    double *q, *k, *v, *r, *out;
    const int32_t *seg;
    size_t nq;
} attn_fd_ctx;

static double attn_objective(void *p)
{
    attn_fd_ctx *c = p;
    ref_attention_fwd(c->out, NULL, c->q, c->k, c->v, c->seg, c->s);
    return bt_dot(c->r, c->out, c->nq);
}

static bool attn_fd_check(ft_backend **bes, int nbe, ft_attn_shape s, seg_kind kind,
                          uint64_t seed)
{
    attn_data d = attn_data_make(s, kind, seed, 1.5f);
    attn_fd_ctx c = {s, bt_to_double(d.q, d.nq), bt_to_double(d.k, d.nkv),
                     bt_to_double(d.v, d.nkv), bt_to_double(d.dout, d.nq),
                     malloc(d.nq * sizeof(double)), d.seg, d.nq};
    double *gq = malloc(d.nq * sizeof(double)), *gk = malloc(d.nkv * sizeof(double));
    double *gv = malloc(d.nkv * sizeof(double));
    bt_fd_gradient(gq, c.q, d.nq, 1e-4, attn_objective, &c);
    bt_fd_gradient(gk, c.k, d.nkv, 1e-4, attn_objective, &c);
    bt_fd_gradient(gv, c.v, d.nkv, 1e-4, attn_objective, &c);
    bool ok = true;
    for (int i = 0; i < nbe; i++) {
        attn_result res = attn_run(bes[i], &d);
        const char *isa = isa_names[ft_cpu_isa_of(bes[i])];
        char what[96];
        snprintf(what, sizeof what, "FD dq T=%d %s", s.seq_len, isa);
        ok &= bt_close(what, res.dq, gq, d.nq, FD_REL, FD_ABS);
        snprintf(what, sizeof what, "FD dk T=%d %s", s.seq_len, isa);
        ok &= bt_close(what, res.dk, gk, d.nkv, FD_REL, FD_ABS);
        snprintf(what, sizeof what, "FD dv T=%d %s", s.seq_len, isa);
        ok &= bt_close(what, res.dv, gv, d.nkv, FD_REL, FD_ABS);
        attn_result_free(&res);
    }
    free(gq), free(gk), free(gv);
    free(c.q), free(c.k), free(c.v), free(c.r), free(c.out);
    attn_data_free(&d);
    return ok;
}

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    ft_backend *bes[3];
    int nbe = make_backends(bes);
    bool ok = true;
    ok &= attn_fd_check(bes, nbe, (ft_attn_shape){2, 11, 4, 2, 8, 0}, SEG_DOCS, 11);
    ok &= attn_fd_check(bes, nbe, (ft_attn_shape){1, 67, 2, 1, 16, 0}, SEG_NONE, 12);
    ok &= attn_fd_check(bes, nbe, (ft_attn_shape){1, 70, 2, 2, 16, 0}, SEG_DOCS, 13);
    /* sliding window: 3 keys inside a document, 9 keys across a tile edge */
    ok &= attn_fd_check(bes, nbe, (ft_attn_shape){2, 11, 4, 2, 8, 3}, SEG_DOCS, 14);
    ok &= attn_fd_check(bes, nbe, (ft_attn_shape){1, 70, 2, 1, 16, 9}, SEG_NONE, 15);
    for (int i = 0; i < nbe; i++)
        ft_backend_destroy(bes[i]);
    assert_true(ok);
}

/* Document masking == running each document alone as its own sequence. */
static void test_documents_equal_separate_sequences(void **state)
{
    (void)state;
    ft_backend *bes[3];
    int nbe = make_backends(bes);
    ft_attn_shape s = {2, 150, 8, 2, 32, 0};
    attn_data d = attn_data_make(s, SEG_DOCS, 21, 1.5f);
    int nh = s.n_heads, nkv = s.n_kv_heads, hd = s.head_dim, T = s.seq_len;
    bool ok = true;
    int docs = 0;
    for (int i = 0; i < nbe; i++) {
        ft_backend *be = bes[i];
        attn_result packed = attn_run(be, &d);
        for (int b = 0; b < s.batch; b++) {
            for (int t0 = 0; t0 < T;) {
                int32_t id = d.seg[(size_t)b * T + t0];
                int len = 1;
                while (t0 + len < T && d.seg[(size_t)b * T + t0 + len] == id)
                    len++;
                ft_attn_shape one = {1, len, nh, nkv, hd, 0};
                attn_data alone = attn_data_make(one, SEG_NONE, 0, 1.0f);
                for (int t = 0; t < len; t++) {
                    size_t src = (size_t)b * T + t0 + t;
                    memcpy(alone.q + (size_t)t * nh * hd, d.q + src * nh * hd, nh * hd * sizeof(float));
                    memcpy(alone.dout + (size_t)t * nh * hd, d.dout + src * nh * hd, nh * hd * sizeof(float));
                    memcpy(alone.k + (size_t)t * nkv * hd, d.k + src * nkv * hd, nkv * hd * sizeof(float));
                    memcpy(alone.v + (size_t)t * nkv * hd, d.v + src * nkv * hd, nkv * hd * sizeof(float));
                }
                attn_result sep = attn_run(be, &alone);
                /* The packed results of this document, gathered the same way. */
                attn_result pk = {malloc(alone.nq * 4), malloc(alone.nlse * 4), malloc(alone.nq * 4),
                                  malloc(alone.nkv * 4), malloc(alone.nkv * 4)};
                for (int t = 0; t < len; t++) {
                    size_t src = (size_t)b * T + t0 + t;
                    memcpy(pk.out + (size_t)t * nh * hd, packed.out + src * nh * hd, nh * hd * 4);
                    memcpy(pk.dq + (size_t)t * nh * hd, packed.dq + src * nh * hd, nh * hd * 4);
                    memcpy(pk.dk + (size_t)t * nkv * hd, packed.dk + src * nkv * hd, nkv * hd * 4);
                    memcpy(pk.dv + (size_t)t * nkv * hd, packed.dv + src * nkv * hd, nkv * hd * 4);
                    for (int h = 0; h < nh; h++)
                        pk.lse[(size_t)h * len + t] = packed.lse[((size_t)b * nh + h) * T + t0 + t];
                }
                char what[96];
                snprintf(what, sizeof what, "doc b=%d t0=%d len=%d", b, t0, len);
                bool same = bt_close_ff(what, pk.out, sep.out, alone.nq, ATTN_REL, ATTN_ABS) &&
                            bt_close_ff(what, pk.lse, sep.lse, alone.nlse, LSE_REL, LSE_ABS) &&
                            bt_close_ff(what, pk.dq, sep.dq, alone.nq, ATTN_REL, ATTN_ABS) &&
                            bt_close_ff(what, pk.dk, sep.dk, alone.nkv, ATTN_REL, ATTN_ABS) &&
                            bt_close_ff(what, pk.dv, sep.dv, alone.nkv, ATTN_REL, ATTN_ABS);
                ok &= same;
                docs++;
                attn_result_free(&pk);
                attn_result_free(&sep);
                attn_data_free(&alone);
                t0 += len;
            }
        }
        attn_result_free(&packed);
    }
    fprintf(stderr, "  %d documents compared\n", docs);
    attn_data_free(&d);
    for (int i = 0; i < nbe; i++)
        ft_backend_destroy(bes[i]);
    assert_true(ok);
}

/* Every output element is summed in a fixed order by one task: results are
 * bit-identical for any number of threads. */
static void test_deterministic_across_thread_counts(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    ft_attn_shape s = {2, 200, 8, 2, 64, 0};
    attn_data d = attn_data_make(s, SEG_DOCS, 31, 1.5f);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    attn_result one = attn_run(be, &d);
    for (int threads = 2; threads <= 4; threads++) {
        omp_set_num_threads(threads);
        attn_result many = attn_run(be, &d);
        assert_memory_equal(one.out, many.out, d.nq * sizeof(float));
        assert_memory_equal(one.lse, many.lse, d.nlse * sizeof(float));
        assert_memory_equal(one.dq, many.dq, d.nq * sizeof(float));
        assert_memory_equal(one.dk, many.dk, d.nkv * sizeof(float));
        assert_memory_equal(one.dv, many.dv, d.nkv * sizeof(float));
        attn_result_free(&many);
    }
    omp_set_num_threads(saved);
    attn_result_free(&one);
    attn_data_free(&d);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiled_matches_naive),
        cmocka_unit_test(test_sliding_window_matches_naive),
        cmocka_unit_test(test_scattered_ids_and_large_scores),
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_documents_equal_separate_sequences),
        cmocka_unit_test(test_deterministic_across_thread_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
