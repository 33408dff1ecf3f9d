/* The tensor-core attention (cuda/cuda_attention_tc*.cu) against the CPU backend's fp32
 * flash attention on the same bf16-rounded inputs: causal, document masks (packed, many
 * short ones, ones spanning tiles, scattered ids), sliding windows (1, under a tile, a
 * tile, not a tile multiple, over T; with documents), GQA, odd lengths, head dims 64, 80,
 * 128, 256; forward and backward (the backward from the CPU's forward results, so it is
 * compared alone).
 *
 * Tile skipping. Under the CPU execution harness the kernels count the tile pairs they
 * compute (ft_cuda_attention_tc_tiles); with packed documents (non-decreasing ids) and a
 * window that count must equal the number of tile pairs holding at least one visible
 * (query, key) pair, counted here by brute force: fewer means a needed tile was skipped
 * (the comparison with the CPU fails too), more means a masked tile was computed.
 * Determinism: a second backward of the windowed and head_dim-256 GQA cases must give
 * the same bits. The one-pass backward (FTMPI_ATTENTION_NONDETERMINISTIC=1: dQ summed
 * with atomics by the dK/dV pass) is checked against the same references, with no dQ
 * pass run, and is exempt from the bitwise check. The dK/dV pass's 128-key block
 * (FTMPI_TC_BWD_KEYS=128) and its shared layout (FTMPI_TC_BWD_LAYOUT=shared) must give
 * the default block's bits (two passes).
 *
 * Tolerances. The scores are exact bf16 products summed in fp32, so lse agrees to fp32
 * round-off (relative 1e-5 of |lse| + 1e-5). The output multiplies probabilities rounded
 * to bf16 (relative error <= 2^-9) by V and sums over keys: |err| <= 2^-9 max|v| per
 * query, so out is checked to 4e-3 * max|v| + 1e-3 |ref|. The backward rounds P and dS
 * to bf16 before their products (dV = P^T dO, dQ = dS K, dK = dS^T Q): errors of 2^-9 of
 * each term, so the gradients are checked to 1e-2 of their largest magnitude plus 1e-2
 * relative.
 *
 * Runs on a GPU or on the CPU execution harness; exit 77 (SKIP) without a device. */
#include "backend/backend.h"
#include "util/bf16.h"
#include "cuda_internal.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks, wgmma_forwards, wgmma_backwards;
static uint64_t rng = 0x853c49e6748fea9bull;

static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    if (h && bytes)
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* worst |got - ref| / (floor + afrac max|ref| + rtol |ref|) over n values. `floor` is an
 * absolute term for gradients that are exactly 0 (a query that sees one key: dP = D), where
 * max|ref| is rounding noise too (as in test_cuda_ops). */
static double worst_ratio(const float *got, const float *ref, size_t n, double afrac, double rtol,
                          double floor)
{
    double maxref = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        maxref = fabs(ref[i]) > maxref ? fabs(ref[i]) : maxref;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double lim = floor + afrac * maxref + rtol * fabs(ref[i]);
        double r = err != err ? INFINITY : (lim > 0 ? err / lim : (err > 0 ? INFINITY : 0));
        worst = r > worst ? r : worst;
    }
    return worst;
}

enum seg_kind { SEG_NONE, SEG_PACKED, SEG_SCATTERED, SEG_SHORT, SEG_LONG, SEG_TWO };
static const char *const seg_name[] = {"none",      "docs",      "scattered",
                                       "short docs", "long docs", "two docs"};

/* segment id of token t (of a row of seq): packed documents of 23, 3, 90 or 200 tokens,
 * or ids in no order */
static int32_t segment_of(enum seg_kind kind, size_t i, int seq)
{
    int t = (int)(i % (size_t)seq);
    switch (kind) {
    case SEG_PACKED: return t / 23;
    case SEG_SHORT: return t / 3;
    case SEG_LONG: return t / 90;
    case SEG_TWO: return t / 200;
    default: return (int32_t)((i * 7) % 3);
    }
}

/* The one-pass backward (FTMPI_ATTENTION_NONDETERMINISTIC=1, head_dim <= 128,
 * cuda_attention_tc_bwd.cu): dQ summed with atomics by the dK/dV pass, no dQ pass. */
static bool one_pass(int hd)
{
    const char *e = getenv("FTMPI_ATTENTION_NONDETERMINISTIC");
    return hd <= 128 && e && strcmp(e, "1") == 0;
}

/* The dK/dV switches as they are, to be put back (switches_restore) after running the
 * default layout. */
typedef struct switches {
    char keys[16], layout[16];
} switches;

static switches switches_clear(void)
{
    switches w = {"", ""};
    const char *k = getenv("FTMPI_TC_BWD_KEYS"), *l = getenv("FTMPI_TC_BWD_LAYOUT");
    snprintf(w.keys, sizeof w.keys, "%s", k ? k : "");
    snprintf(w.layout, sizeof w.layout, "%s", l ? l : "");
    unsetenv("FTMPI_TC_BWD_KEYS");
    unsetenv("FTMPI_TC_BWD_LAYOUT");
    return w;
}

static void switches_restore(const switches *w)
{
    if (w->keys[0])
        setenv("FTMPI_TC_BWD_KEYS", w->keys, 1);
    if (w->layout[0])
        setenv("FTMPI_TC_BWD_LAYOUT", w->layout, 1);
}

#ifdef FT_CUDA_EMULATION /* only the harness counts the tiles the kernels compute */
static bool visible(const int32_t *seg, int window, int i, int j)
{
    return j <= i && (window == 0 || j > i - window) && (!seg || seg[j] == seg[i]);
}

/* Query rows per warp of the forward (cuda_attention_tc.cu: TcFwdCfg, the dispatch). */
static int fwd_rows(int hd)
{
    const char *e = getenv("FTMPI_TC_FWD_ROWS");
    return hd > 128 || (hd > 64 && e && strcmp(e, "16") == 0) ? 16 : 32;
}

/* Keys per tile of the forward (cuda_attention_tc.cu: the dispatch; 32 at head_dim 65-128
 * only with 32 query rows per warp). */
static int fwd_keys(int hd)
{
    const char *e = getenv("FTMPI_TC_FWD_KEYS");
    if (hd > 128)
        return 32;
    if (e && hd <= 64 && strcmp(e, "128") == 0)
        return 128;
    if (e && hd > 64 && fwd_rows(hd) == 32 && strcmp(e, "32") == 0)
        return 32;
    return 64;
}

/* Keys per tile of the wgmma forward (cuda_attention_wgmma.cu: WgFwdCfg). */
static int wgmma_keys(int hd) { return hd > 128 ? 64 : 128; }

/* Tile pairs ([q0, q0+bq) x [k0, k0+bk), clipped to seq) of one row holding a visible
 * pair, summed over `heads` heads of every row: what a kernel walking bq-query tiles
 * against bk-key tiles must compute. */
static unsigned long long needed_tiles(const int32_t *seg, int batch, int seq, int heads,
                                       int window, int bq, int bk)
{
    unsigned long long n = 0;
    for (int b = 0; b < batch; b++) {
        const int32_t *sr = seg ? seg + (size_t)b * seq : NULL;
        for (int q0 = 0; q0 < seq; q0 += bq)
            for (int k0 = 0; k0 < seq; k0 += bk) {
                bool any = false;
                for (int i = q0; i < q0 + bq && i < seq && !any; i++)
                    for (int j = k0; j < k0 + bk && j < seq && !any; j++)
                        any = visible(sr, window, i, j);
                n += any;
            }
    }
    return n * (unsigned long long)heads;
}

/* The pairs of a warp's queries [q0, q0+wq) and keys [k0, k0+wk) (the warp's own part of
 * a tile pair, footprints aligned to their sizes), summed over `heads` heads of every row:
 * those with a visible pair (*computed: a warp must compute them) and, of these, those
 * where some pair of the footprint is not visible (*masked: the mask must be evaluated).
 * Tokens past the end count as not visible, as their zero-filled rows must be masked. */
static void needed_warp_tiles(const int32_t *seg, int batch, int seq, int heads, int window,
                              int wq, int wk, unsigned long long *computed,
                              unsigned long long *masked)
{
    *computed = *masked = 0;
    for (int b = 0; b < batch; b++) {
        const int32_t *sr = seg ? seg + (size_t)b * seq : NULL;
        for (int q0 = 0; q0 < seq; q0 += wq)
            for (int k0 = 0; k0 < seq; k0 += wk) {
                bool any = false, all = true;
                for (int i = q0; i < q0 + wq; i++)
                    for (int j = k0; j < k0 + wk; j++) {
                        bool vis = i < seq && j < seq && visible(sr, window, i, j);
                        any = any || vis;
                        all = all && vis;
                    }
                *computed += any * (unsigned long long)heads;
                *masked += (any && !all) * (unsigned long long)heads;
            }
    }
}
#endif

/* One backward's device inputs, to run it again (backward_repeats). */
typedef struct bwd_call {
    void *ddo, *dro, *drl, *dq, *dk, *dv, *ds, *scratch;
    ft_attn_shape s;
    size_t nq, nkv;
} bwd_call;

/* Runs the backward of c again into fresh buffers: true when it launches and its dQ, dK
 * and dV are bitwise first[0..2] (host copies of an earlier run). */
static bool backward_repeats(const bwd_call *c, const float *const first[3])
{
    const size_t n[3] = {c->nq, c->nkv, c->nkv};
    float *d[3] = {dev_copy(NULL, n[0] * 4), dev_copy(NULL, n[1] * 4), dev_copy(NULL, n[2] * 4)};
    bool ok = ft_cuda_launch_attention_bwd_bf16(FT_DTYPE_F32, d[0], d[1], d[2], c->ddo, c->dro,
                                                c->drl, c->dq, c->dk, c->dv, c->ds, c->s,
                                                c->scratch, 0) == cudaSuccess;
    float *h = malloc(c->nq * 4);
    for (int i = 0; i < 3; i++) {
        cudaMemcpy(h, d[i], n[i] * 4, cudaMemcpyDeviceToHost);
        ok = ok && memcmp(h, first[i], n[i] * 4) == 0;
        cudaFree(d[i]);
    }
    free(h);
    return ok;
}

/* Set: every row's first key scores far above the others (positive queries, the key all
 * 2.0), so that the forward's running maxima never move after the first key tile. */
static bool sink_key;

static void check_case(ft_backend *cpu, int batch, int seq, int heads, int kv, int hd,
                       enum seg_kind seg_kind, int window)
{
    ft_attn_shape s = {batch, seq, heads, kv, hd, window};
    size_t tokens = (size_t)batch * seq, nq = tokens * heads * hd, nkv = tokens * kv * hd;
    size_t nl = (size_t)batch * heads * seq;
    uint16_t *qb = malloc(nq * 2), *kb = malloc(nkv * 2), *vb = malloc(nkv * 2);
    float *qf = malloc(nq * 4), *kf = malloc(nkv * 4), *vf = malloc(nkv * 4);
    int32_t *seg = seg_kind ? malloc(tokens * 4) : NULL;
    for (size_t i = 0; i < nq; i++)
        qf[i] = ft_bf16_to_f32(qb[i] = ft_f32_to_bf16(sink_key ? uniform(0.25, 2) : uniform(-2, 2)));
    for (size_t i = 0; i < nkv; i++) {
        /* with sink_key, the first key of every row scores far above the rest */
        const bool sink = sink_key && (i / ((size_t)kv * hd)) % seq == 0;
        kf[i] = ft_bf16_to_f32(kb[i] = ft_f32_to_bf16(sink ? 2.0f : uniform(-2, 2)));
        vf[i] = ft_bf16_to_f32(vb[i] = ft_f32_to_bf16(uniform(-1, 1)));
    }
    for (size_t i = 0; seg && i < tokens; i++)
        seg[i] = segment_of(seg_kind, i, seq);

    /* reference: the CPU backend's fp32 attention on the bf16 values */
    float *cq = cpu->ops->alloc(cpu, nq * 4), *ck = cpu->ops->alloc(cpu, nkv * 4);
    float *cv = cpu->ops->alloc(cpu, nkv * 4), *co = cpu->ops->alloc(cpu, nq * 4);
    float *cl = cpu->ops->alloc(cpu, nl * 4);
    int32_t *cs = seg ? cpu->ops->alloc(cpu, tokens * 4) : NULL;
    cpu->ops->upload(cpu, cq, qf, nq * 4);
    cpu->ops->upload(cpu, ck, kf, nkv * 4);
    cpu->ops->upload(cpu, cv, vf, nkv * 4);
    if (seg)
        cpu->ops->upload(cpu, cs, seg, tokens * 4);
    cpu->ops->attention_fwd(cpu, FT_DTYPE_F32, co, cl, cq, ck, cv, cs, s);
    float *ro = malloc(nq * 4), *rl = malloc(nl * 4);
    cpu->ops->download(cpu, ro, co, nq * 4);
    cpu->ops->download(cpu, rl, cl, nl * 4);

    void *dq = dev_copy(qb, nq * 2), *dk = dev_copy(kb, nkv * 2), *dv = dev_copy(vb, nkv * 2);
    void *ds = seg ? dev_copy(seg, tokens * 4) : NULL;
    float *dout = dev_copy(NULL, nq * 4), *dlse = dev_copy(NULL, nl * 4);
#ifdef FT_CUDA_EMULATION
    memset(ft_cuda_attention_tc_tiles, 0, sizeof ft_cuda_attention_tc_tiles);
#endif
    void *fscratch = dev_copy(NULL, ft_cuda_attention_fwd_bf16_scratch_bytes(s));
    cudaError_t e =
        ft_cuda_launch_attention_fwd_bf16(FT_DTYPE_F32, dout, dlse, dq, dk, dv, ds, s, fscratch, 0);
    float *go = malloc(nq * 4), *gl = malloc(nl * 4);
    cudaMemcpy(go, dout, nq * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gl, dlse, nl * 4, cudaMemcpyDeviceToHost);

    double worst_o = 0, worst_l = 0;
    size_t bad = 0;
    for (size_t i = 0; i < nq; i++) {
        double err = fabs((double)go[i] - ro[i]), lim = 4e-3 + 1e-3 * fabs(ro[i]);
        if (!(err <= lim))
            bad++;
        if (err / lim > worst_o || err != err)
            worst_o = err != err ? INFINITY : err / lim;
    }
    for (size_t i = 0; i < nl; i++) {
        double err = fabs((double)gl[i] - rl[i]), lim = 1e-5 + 1e-5 * fabs(rl[i]);
        if (!(err <= lim))
            bad++;
        if (err / lim > worst_l || err != err)
            worst_l = err != err ? INFINITY : err / lim;
    }
    checks++;
    int ok = e == cudaSuccess && bad == 0;
    char what[96];
    snprintf(what, sizeof what, "B=%d T=%d H=%d KV=%d D=%d seg=%s window=%d", batch, seq, heads,
             kv, hd, seg_name[seg_kind], window);
    printf("%s attention_fwd_bf16 %s: worst out %.2f, lse %.2f of tolerance%s\n",
           ok ? "ok  " : "FAIL", what, worst_o, worst_l,
           e == cudaSuccess ? "" : " (launch failed)");
    failures += !ok;

    /* backward from the CPU's forward results: dO rounded to bf16 for both */
    uint16_t *dob = malloc(nq * 2);
    float *dof = malloc(nq * 4);
    for (size_t i = 0; i < nq; i++)
        dof[i] = ft_bf16_to_f32(dob[i] = ft_f32_to_bf16(uniform(-1, 1)));
    float *cdo = cpu->ops->alloc(cpu, nq * 4), *cdq = cpu->ops->alloc(cpu, nq * 4);
    float *cdk = cpu->ops->alloc(cpu, nkv * 4), *cdv = cpu->ops->alloc(cpu, nkv * 4);
    cpu->ops->upload(cpu, cdo, dof, nq * 4);
    cpu->ops->attention_bwd(cpu, FT_DTYPE_F32, cdq, cdk, cdv, cdo, co, cl, cq, ck, cv, cs, s);
    float *rdq = malloc(nq * 4), *rdk = malloc(nkv * 4), *rdv = malloc(nkv * 4);
    cpu->ops->download(cpu, rdq, cdq, nq * 4);
    cpu->ops->download(cpu, rdk, cdk, nkv * 4);
    cpu->ops->download(cpu, rdv, cdv, nkv * 4);
    void *ddo = dev_copy(dob, nq * 2), *dro = dev_copy(ro, nq * 4), *drl = dev_copy(rl, nl * 4);
    float *ddq = dev_copy(NULL, nq * 4), *ddk = dev_copy(NULL, nkv * 4), *ddv = dev_copy(NULL, nkv * 4);
    void *scratch = dev_copy(NULL, ft_cuda_attention_bwd_bf16_scratch_bytes(s));
    e = ft_cuda_launch_attention_bwd_bf16(FT_DTYPE_F32, ddq, ddk, ddv, ddo, dro, drl, dq, dk, dv, ds, s,
                                          scratch, 0);
    float *gdq = malloc(nq * 4), *gdk = malloc(nkv * 4), *gdv = malloc(nkv * 4);
    cudaMemcpy(gdq, ddq, nq * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gdk, ddk, nkv * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gdv, ddv, nkv * 4, cudaMemcpyDeviceToHost);
    /* dP - D noise: eps sqrt(hd) |dO| |v| (|dO| <= 1, |v| <= 1), times |k| or |q| <= 2 */
    double floor = 16.0 * 6e-8 * sqrt((double)hd) * 2.0;
    double wq = worst_ratio(gdq, rdq, nq, 1e-2, 1e-2, floor);
    double wk = worst_ratio(gdk, rdk, nkv, 1e-2, 1e-2, floor);
    double wv = worst_ratio(gdv, rdv, nkv, 1e-2, 1e-2, floor);
    checks++;
    ok = e == cudaSuccess && wq <= 1 && wk <= 1 && wv <= 1;
    printf("%s attention_bwd_bf16 %s: worst dq %.2f, dk %.2f, dv %.2f of tolerance%s\n",
           ok ? "ok  " : "FAIL", what, wq, wk, wv, e == cudaSuccess ? "" : " (launch failed)");
    failures += !ok;
    /* the dK/dV block the backward took (cuda_attention_tc_bwd.cu: the layouts) */
    const int layout = ft_cuda_attention_tc_bwd_layout(s);
    const bool wgmma = ft_cuda_attention_tc_fwd_wgmma(s); /* the forward on wgmma */
    const bool bwd_wgmma = ft_cuda_attention_tc_bwd_wgmma(s); /* the backward on wgmma */
    wgmma_forwards += wgmma;
    wgmma_backwards += bwd_wgmma;
#ifdef FT_CUDA_EMULATION
    /* the exact count needs ranges that are the documents themselves: packed ids. The
     * forward (cuda_attention_tc.cu, TcFwdCfg) pairs 128-query tiles with 64-key ones, 64
     * with 32 at head_dim > 128; the dK/dV pass (cuda_attention_tc_bwd.cu, TcBwdCfg) 64
     * queries with 64 keys (128 with FTMPI_TC_BWD_KEYS=128 and in the shared layout), 32
     * at head_dim > 128; the dQ pass 64 with 64 (128 with 64 in the shared layout). The
     * dK/dV pass visits each pair once per query head of the group. */
    if (seg_kind != SEG_SCATTERED) {
        int fwd_bq = wgmma ? 128 : 4 * fwd_rows(hd);
        int dkdv_keys = layout != FT_TC_BWD_OWN ? 128 : hd > 128 ? 32 : 64; /* a block's */
        bool shared = layout == FT_TC_BWD_SHARED;
        unsigned long long want[3] = {needed_tiles(seg, batch, seq, heads, window, fwd_bq,
                                                   wgmma ? wgmma_keys(hd) : fwd_keys(hd)),
                                      needed_tiles(seg, batch, seq, heads, window, 64,
                                                   bwd_wgmma ? 128 : dkdv_keys),
                                      one_pass(hd) ? 0
                                                   : needed_tiles(seg, batch, seq, heads, window,
                                                                  shared || bwd_wgmma ? 128 : 64,
                                                                  64)};
        unsigned long long *got = ft_cuda_attention_tc_tiles;
        checks++;
        ok = got[0] == want[0] && got[1] == want[1] && got[2] == want[2];
        printf("%s attention tiles %s: computed fwd %llu, dkdv %llu, dq %llu; needed %llu, "
               "%llu, %llu\n",
               ok ? "ok  " : "FAIL", what, got[0], got[1], got[2], want[0], want[1], want[2]);
        failures += !ok;
    }
    /* Per warp: the tile pairs a warp computes and those on which it evaluates the mask
     * per element are exactly those holding a visible pair and, of them, those also holding
     * an invisible one. A forward warp holds 32 query rows against 64 keys (16 against 32
     * at head_dim 256), a dK/dV warp 16 keys against 64 queries (32 against 32 in the
     * shared layout's scores), a dQ warp 16 queries against 64 keys (32 against 32 in the
     * shared layout's scores). At head_dim 256 two
     * dK/dV warps share each key group (the feature split), so each of their tiles counts
     * twice. */
    if (seg_kind != SEG_SCATTERED) {
        unsigned long long want[6], *got = ft_cuda_attention_tc_tiles;
        bool big = hd > 128, shared = layout == FT_TC_BWD_SHARED;
        if (wgmma) { /* a warpgroup's 64 rows against a tile, counted by its 4 warps */
            needed_warp_tiles(seg, batch, seq, heads, window, 64, wgmma_keys(hd), &want[0],
                              &want[1]);
            want[0] *= 4, want[1] *= 4;
        } else {
            needed_warp_tiles(seg, batch, seq, heads, window, fwd_rows(hd), fwd_keys(hd),
                              &want[0], &want[1]);
        }
        needed_warp_tiles(seg, batch, seq, heads, window, shared ? 32 : 64, shared ? 32 : 16,
                          &want[2], &want[3]);
        needed_warp_tiles(seg, batch, seq, heads, window, shared ? 32 : 16, shared ? 32 : 64,
                          &want[4], &want[5]);
        if (bwd_wgmma) { /* a warpgroup's 64 keys or queries, counted by its 4 warps */
            needed_warp_tiles(seg, batch, seq, heads, window, 64, 64, &want[2], &want[3]);
            needed_warp_tiles(seg, batch, seq, heads, window, 64, 64, &want[4], &want[5]);
            for (int i = 2; i < 6; i++)
                want[i] *= 4;
        }
        if (one_pass(hd))
            want[4] = want[5] = 0;
        if (big)
            want[2] *= 2, want[3] *= 2;
        checks++;
        ok = memcmp(got + 3, want, sizeof want) == 0;
        printf("%s attention warp tiles %s: computed/masked fwd %llu/%llu, dkdv %llu/%llu, dq "
               "%llu/%llu; needed %llu/%llu, %llu/%llu, %llu/%llu\n",
               ok ? "ok  " : "FAIL", what, got[3], got[4], got[5], got[6], got[7], got[8],
               want[0], want[1], want[2], want[3], want[4], want[5]);
        failures += !ok;
    }
    /* The forward's rescale of O is skipped exactly where no row of the warp's moved its
     * maximum: with a sink key (causal, no documents), every warp tile but the first of
     * each warp's rows (the one with key 0); never more than the warp tiles otherwise. */
    {
        unsigned long long *got = ft_cuda_attention_tc_tiles;
        const int wr = wgmma ? 16 : fwd_rows(hd);
        const unsigned long long warps = (unsigned long long)batch * heads * ((seq + wr - 1) / wr);
        checks++;
        ok = sink_key ? got[9] == got[3] - warps : got[9] <= got[3];
        printf("%s attention rescales skipped %s%s: %llu of %llu forward warp tiles%s\n",
               ok ? "ok  " : "FAIL", what, sink_key ? " (sink key)" : "", got[9], got[3],
               sink_key ? " (all but each warp's first expected)" : "");
        failures += !ok;
    }
#endif
    const bwd_call again = {ddo, dro, drl, dq, dk, dv, ds, scratch, s, nq, nkv};
    const float *const first[3] = {gdq, gdk, gdv};
    /* GQA (dK/dV sum over the group's heads) with a window or the feature split: a second
     * backward (under the harness in another thread order when it is random) gives the
     * same bits, as every gradient element is summed by one thread in a fixed order */
    if (kv < heads && (window > 0 || hd > 128) && !one_pass(hd)) {
        ok = backward_repeats(&again, first);
        checks++;
        printf("%s attention_bwd_bf16 %s: a second backward %s\n", ok ? "ok  " : "FAIL", what,
               ok ? "is bitwise the first" : "differs from the first");
        failures += !ok;
    }
    /* The dK/dV pass's other blocks (128 keys; the shared layout): every dK and dV
     * element is summed over the same query tiles, 16 queries a product, in the same
     * order, so the two passes' dQ, dK and dV are bitwise those of the default block */
    if (layout != FT_TC_BWD_OWN && !one_pass(hd)) {
        switches saved = switches_clear();
        ok = backward_repeats(&again, first);
        switches_restore(&saved);
        checks++;
        printf("%s attention_bwd_bf16 %s: the default dK/dV block %s the %s's\n",
               ok ? "ok  " : "FAIL", what, ok ? "gives the bits of" : "differs from",
               layout == FT_TC_BWD_SHARED ? "shared layout" : "128-key block");
        failures += !ok;
    }
    cudaFree(ddo), cudaFree(dro), cudaFree(drl), cudaFree(ddq), cudaFree(ddk), cudaFree(ddv);
    cudaFree(scratch), cudaFree(fscratch);
    cpu->ops->free(cpu, cdo), cpu->ops->free(cpu, cdq), cpu->ops->free(cpu, cdk);
    cpu->ops->free(cpu, cdv);
    free(dob), free(dof), free(rdq), free(rdk), free(rdv), free(gdq), free(gdk), free(gdv);

    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(dlse);
    if (ds)
        cudaFree(ds);
    void *c[] = {cq, ck, cv, co, cl, cs};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (c[i])
            cpu->ops->free(cpu, c[i]);
    free(qb), free(kb), free(vb), free(qf), free(kf), free(vf), free(seg);
    free(ro), free(rl), free(go), free(gl);
}

/* The cases for a dK/dV block other than the default, two passes and one: causal at both
 * head sizes, GQA (the group's heads summed by one thread, bitwise repeatable), documents
 * (packed, scattered), windows, lengths that end inside a block's second half, the sink
 * key, and head_dim 256, which keeps the default block. */
static void check_dkdv_blocks(ft_backend *cpu)
{
    check_case(cpu, 1, 300, 2, 1, 64, SEG_NONE, 0);
    check_case(cpu, 1, 330, 4, 2, 128, SEG_TWO, 0);
    check_case(cpu, 1, 150, 2, 2, 128, SEG_NONE, 64);
    check_case(cpu, 2, 131, 4, 2, 64, SEG_NONE, 20);
    check_case(cpu, 1, 201, 2, 1, 64, SEG_LONG, 100);
    check_case(cpu, 1, 200, 2, 1, 80, SEG_SHORT, 0);
    check_case(cpu, 1, 130, 4, 4, 128, SEG_SCATTERED, 0);
    check_case(cpu, 1, 99, 2, 1, 256, SEG_PACKED, 40);
    sink_key = true;
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    sink_key = false;
    setenv("FTMPI_ATTENTION_NONDETERMINISTIC", "1", 1);
    check_case(cpu, 1, 300, 2, 1, 64, SEG_NONE, 0);
    check_case(cpu, 1, 330, 4, 2, 128, SEG_TWO, 0);
    check_case(cpu, 2, 131, 2, 1, 64, SEG_NONE, 20);
    check_case(cpu, 1, 70, 3, 1, 80, SEG_PACKED, 0);
    check_case(cpu, 1, 201, 2, 1, 48, SEG_LONG, 100);
    unsetenv("FTMPI_ATTENTION_NONDETERMINISTIC");
}

/* The kernels on Hopper's warpgroup MMA (FTMPI_TC_FWD_WGMMA=1, cuda_attention_wgmma.cu;
 * FTMPI_TC_BWD_WGMMA=1, cuda_attention_wgmma_bwd.cu), where the device takes them (compute
 * capability 9.0: test_attention_tc_h100.sh runs these on the harness's H100 model;
 * elsewhere the switches must fall back to the mma.sync kernels): causal within one tile
 * and over several, head sizes 64, 128 and 256 (forward; the backward keeps mma.sync
 * there) and the features zero-filled under them (48, 80,
 * 96), GQA (the backward's repeat bitwise with a window), packed, short, long and
 * scattered documents, windows, a length ending in the first warpgroup's rows, one token,
 * the sink key. */
static void check_wgmma(ft_backend *cpu)
{
    setenv("FTMPI_TC_FWD_WGMMA", "1", 1);
    setenv("FTMPI_TC_BWD_WGMMA", "1", 1);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_NONE, 0);
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    check_case(cpu, 1, 330, 4, 2, 128, SEG_TWO, 0);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_PACKED, 0);
    check_case(cpu, 1, 200, 2, 1, 64, SEG_SHORT, 0);
    check_case(cpu, 1, 201, 2, 1, 96, SEG_LONG, 100);
    check_case(cpu, 1, 130, 4, 4, 128, SEG_SCATTERED, 0);
    check_case(cpu, 2, 131, 2, 1, 48, SEG_NONE, 20);
    check_case(cpu, 1, 150, 2, 2, 80, SEG_NONE, 1);
    check_case(cpu, 1, 77, 2, 2, 64, SEG_NONE, 500);
    check_case(cpu, 1, 290, 2, 1, 128, SEG_NONE, 0);
    check_case(cpu, 2, 1, 2, 1, 64, SEG_NONE, 0);
    sink_key = true;
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    check_case(cpu, 1, 512, 2, 2, 64, SEG_NONE, 0);
    sink_key = false;
    /* head_dim 256: the forward on wgmma with 64-key tiles, the backward on mma.sync;
     * causal over several tiles, GQA, documents, a window, the sink key */
    check_case(cpu, 1, 99, 2, 1, 256, SEG_PACKED, 40);
    check_case(cpu, 1, 200, 4, 2, 256, SEG_NONE, 0);
    check_case(cpu, 1, 150, 2, 1, 192, SEG_LONG, 70);
    sink_key = true;
    check_case(cpu, 1, 160, 2, 2, 256, SEG_NONE, 0);
    sink_key = false;
    /* the one-pass backward keeps the mma.sync kernels */
    setenv("FTMPI_ATTENTION_NONDETERMINISTIC", "1", 1);
    check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    unsetenv("FTMPI_ATTENTION_NONDETERMINISTIC");
    unsetenv("FTMPI_TC_FWD_WGMMA");
    unsetenv("FTMPI_TC_BWD_WGMMA");
}

/* The default kernels, the forward's tile switches and the one-pass backward. */
static void check_kernels(ft_backend *cpu)
{
    check_case(cpu, 2, 100, 4, 2, 64, SEG_NONE, 0);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_PACKED, 0);
    check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    check_case(cpu, 1, 130, 4, 4, 128, SEG_SCATTERED, 0);
    check_case(cpu, 1, 37, 2, 2, 256, SEG_NONE, 0);
    check_case(cpu, 2, 1, 2, 1, 64, SEG_NONE, 0);
    check_case(cpu, 1, 70, 3, 1, 80, SEG_PACKED, 0);
    /* document skipping: many short documents, documents spanning tiles */
    check_case(cpu, 1, 200, 2, 1, 64, SEG_SHORT, 0);
    check_case(cpu, 1, 200, 2, 2, 64, SEG_LONG, 0);
    /* sliding windows: 1 (each query sees itself), under a tile, a tile, not a tile
     * multiple, over T; with documents, GQA, head_dim 256 (32-key forward tiles) */
    check_case(cpu, 1, 150, 2, 1, 64, SEG_NONE, 1);
    check_case(cpu, 2, 131, 2, 1, 64, SEG_NONE, 20);
    check_case(cpu, 1, 150, 2, 2, 128, SEG_NONE, 64);
    check_case(cpu, 1, 201, 2, 1, 64, SEG_LONG, 100);
    check_case(cpu, 1, 99, 2, 1, 256, SEG_PACKED, 40);
    check_case(cpu, 1, 77, 2, 2, 64, SEG_NONE, 500);
    check_case(cpu, 1, 130, 2, 2, 64, SEG_SCATTERED, 50);
    /* long enough for tiles that need no mask (rows past a whole key tile, inside one
     * document) at both head sizes of the two-m-tile forward, one with Q fragments held,
     * one reloaded */
    check_case(cpu, 1, 300, 2, 1, 64, SEG_NONE, 0);
    /* the running maxima fixed by the first key: every later forward tile skips O's
     * rescale (counted under the harness), results unchanged */
    sink_key = true;
    check_case(cpu, 1, 512, 2, 2, 64, SEG_NONE, 0);
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    sink_key = false;
    check_case(cpu, 1, 330, 2, 1, 128, SEG_TWO, 0);
    /* the forward's other geometry at head_dim 65-128 (16 rows per warp, the GPU tuning
     * switch of cuda_attention_tc.cu) */
    setenv("FTMPI_TC_FWD_ROWS", "16", 1);
    check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    check_case(cpu, 1, 150, 2, 2, 128, SEG_NONE, 64);
    check_case(cpu, 1, 330, 2, 1, 96, SEG_TWO, 0);
    unsetenv("FTMPI_TC_FWD_ROWS");
    /* the forward's 128-key tiles at head_dim <= 64 (the other GPU tuning switch of
     * cuda_attention_tc.cu): causal past a tile, documents, windows, GQA, the sink key
     * (rescales skipped), and head_dim 128, which keeps 64 */
    setenv("FTMPI_TC_FWD_KEYS", "128", 1);
    check_case(cpu, 1, 300, 2, 1, 64, SEG_NONE, 0);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_PACKED, 0);
    check_case(cpu, 1, 201, 2, 1, 64, SEG_LONG, 100);
    check_case(cpu, 2, 131, 2, 1, 48, SEG_NONE, 20);
    check_case(cpu, 1, 200, 2, 2, 64, SEG_SHORT, 0);
    check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    sink_key = true;
    check_case(cpu, 1, 512, 2, 2, 64, SEG_NONE, 0);
    sink_key = false;
    /* and 32-key tiles at head_dim 65-128 (the fragments loaded a k-step ahead) */
    setenv("FTMPI_TC_FWD_KEYS", "32", 1);
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    check_case(cpu, 1, 130, 4, 4, 128, SEG_SCATTERED, 0);
    check_case(cpu, 1, 150, 2, 2, 128, SEG_NONE, 64);
    check_case(cpu, 1, 330, 2, 1, 96, SEG_TWO, 0);
    check_case(cpu, 1, 70, 3, 1, 80, SEG_PACKED, 0);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_NONE, 0);
    sink_key = true;
    check_case(cpu, 1, 300, 2, 1, 128, SEG_NONE, 0);
    sink_key = false;
    unsetenv("FTMPI_TC_FWD_KEYS");
    /* the one-pass backward (dQ by atomics), where it applies, and where it does not
     * (head_dim 256 keeps the two passes); GQA, documents, windows, odd lengths */
    setenv("FTMPI_ATTENTION_NONDETERMINISTIC", "1", 1);
    check_case(cpu, 2, 100, 4, 2, 64, SEG_NONE, 0);
    check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
    check_case(cpu, 1, 201, 2, 1, 64, SEG_LONG, 100);
    check_case(cpu, 2, 131, 2, 1, 64, SEG_NONE, 20);
    check_case(cpu, 1, 70, 3, 1, 80, SEG_PACKED, 0);
    check_case(cpu, 1, 330, 4, 2, 128, SEG_TWO, 0);
    check_case(cpu, 1, 99, 2, 1, 256, SEG_PACKED, 40);
    unsetenv("FTMPI_ATTENTION_NONDETERMINISTIC");
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    ft_backend *cpu = NULL;
    ft_error err;
    ft_error_clear(&err);
    if (ft_backend_cpu_create(&cpu, &err) != 0) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        return 1;
    }
    /* TEST_ATTENTION_TC_ONLY=shared: only the shared layout's cases
     * (test_attention_tc_h100.sh, on the harness's H100 model) */
    const char *only = getenv("TEST_ATTENTION_TC_ONLY");
    const bool shared_only = only && strcmp(only, "shared") == 0;
    if (only && strcmp(only, "wgmma") == 0) {
        check_wgmma(cpu);
        ft_backend_destroy(cpu);
        printf("wgmma forward in %d cases, backward in %d\n", wgmma_forwards, wgmma_backwards);
        printf("%d checks, %d failed\n", checks, failures);
        return failures ? 1 : 0;
    }
    if (!shared_only)
        check_kernels(cpu);
    /* FTMPI_TC_FWD_WGMMA=1 where the device has no wgmma (an A100; a GPU build without
     * sm_90a code): the mma.sync forward, no error */
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (!shared_only && major != 9) {
        setenv("FTMPI_TC_FWD_WGMMA", "1", 1);
        setenv("FTMPI_TC_BWD_WGMMA", "1", 1);
        check_case(cpu, 1, 130, 2, 1, 128, SEG_PACKED, 0);
        unsetenv("FTMPI_TC_FWD_WGMMA");
        unsetenv("FTMPI_TC_BWD_WGMMA");
        checks++;
        const bool ok = wgmma_forwards == 0 && wgmma_backwards == 0;
        printf("%s FTMPI_TC_*_WGMMA=1 on compute capability %d.x: %s\n", ok ? "ok  " : "FAIL",
               major, ok ? "the mma.sync kernels" : "took a wgmma kernel");
        failures += !ok;
    } else if (!shared_only) { /* a Hopper GPU: the wgmma kernels' cases too */
        check_wgmma(cpu);
        printf("wgmma forward in %d cases, backward in %d\n", wgmma_forwards, wgmma_backwards);
        if (!ft_cuda_attention_wgmma_built())
            printf("note: this build has no sm_90a code (configure's NVCC_ARCH): the wgmma "
                   "kernels are not in it and their cases ran on mma.sync\n");
    }
    /* the dK/dV pass's other blocks (the GPU tuning switches of cuda_attention_tc_bwd.cu):
     * 128 keys of 16-key warps, and the shared layout (FlashAttention-2's warp split, P^T
     * and dS^T through shared memory; cuda_attention_tc_bwd_shared.cuh) where the device's
     * shared memory takes it (head_dim 128 needs an H100's: under the harness's default
     * A100 those cases run the 128-key block, test_attention_tc_h100.sh runs them all on
     * the H100's figures) */
    if (!shared_only) {
        setenv("FTMPI_TC_BWD_KEYS", "128", 1);
        check_dkdv_blocks(cpu);
        unsetenv("FTMPI_TC_BWD_KEYS");
    }
    setenv("FTMPI_TC_BWD_LAYOUT", "shared", 1);
    check_dkdv_blocks(cpu);
    unsetenv("FTMPI_TC_BWD_LAYOUT");
    ft_backend_destroy(cpu);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
