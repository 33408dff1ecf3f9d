/* Flash attention on the CPU: causal, with document masking and grouped-query
 * heads, never materialising the [T x T] score matrix.
 *
 * Notation for one (batch row b, query head h): q_i, k_j, v_j, o_i are head_dim
 * vectors, scale = 1/sqrt(head_dim), s_ij = scale q_i.k_j, and query i sees key j
 * iff j <= i, segment[j] == segment[i] and, with a sliding window W > 0 (Mistral),
 * j > i - W (vis(i, j)).
 *
 * Forward, per block of 64 queries, over key tiles of 64 (online softmax):
 *   m_i  = running max of s_ij,  l_i = running sum of exp(s_ij - m_i),
 *   acc_i = running sum of exp(s_ij - m_i) v_j;
 *   when a tile raises the max to m'_i, the old sums are rescaled by
 *   exp(m_i - m'_i). At the end o_i = acc_i / l_i and lse_i = m_i + log(l_i).
 *   A row that sees nothing (impossible for causal masks, where i sees itself)
 *   gets o_i = 0 and lse_i = -inf instead of NaN.
 *
 * Backward, with p_ij = exp(s_ij - lse_i) recomputed tile by tile:
 *   D_i   = sum_d dO_id O_id                  (= sum_j p_ij dP_ij)
 *   dP_ij = dO_i . v_j,   dS_ij = p_ij (dP_ij - D_i)
 *   dV_j += sum_i p_ij dO_i,  dK_j += scale sum_i dS_ij q_i,  dQ_i += scale sum_j dS_ij k_j
 * Summing over keys for dQ and over queries for dK/dV from the same tiles would
 * make threads race on one or the other. Instead the backward makes two passes,
 * each owning its outputs: pass 1 runs one task per (b, kv head, key tile),
 * walking every query tile of every query head of the group (the GQA sum) to
 * produce dK and dV; pass 2 runs one task per (b, query head, query tile) to
 * produce dQ. S, P and dP are computed twice (7 tile products instead of 5), in
 * exchange for no atomics, no per-thread copies of dQ, parallelism of
 * batch x heads x tiles in both passes, and results that are bit-identical for
 * any number of threads (every output element is summed in a fixed order by one
 * task).
 *
 * Layouts. A task transposes only the operand it owns for the whole task and
 * reads the others in place (the tile kernels take strides):
 *  - forward and pass 2 (own a query block) compute the transposed scores
 *    S^T = K (scale Q)^T, a key tile x 64 queries, from a transposed copy of the
 *    query block and the key rows in place; the softmax statistics per query are
 *    then elementwise operations on rows of S^T, vectorised across queries;
 *  - pass 1 (owns a key tile) computes S = Q (scale K)^T from a transposed copy
 *    of its key tile and the query rows in place.
 *
 * Tiles that cannot contain a visible pair are skipped: key tiles past the
 * query block (causality), and tiles whose segment-id ranges do not overlap
 * (document masking; with increasing ids per packed row this skips every tile
 * before the query's own document). Only tiles that straddle the diagonal, a
 * document boundary or the end of the sequence pay for an element-wise mask.
 * With a sliding window, key tiles whose last key is at or before the first
 * query minus W are skipped too (every pair is outside the window), and tiles
 * that straddle the window's lower edge are masked element-wise like the diagonal.
 *
 * Scratch: each thread mallocs its tiles (7 x 64 x head_dim + 2 x 64 x 64 floats)
 * for the duration of the call; the backward also mallocs D [batch, heads, T]. The vtable has no error path, so a failed
 * allocation of this scratch aborts with a message. */
#include "backend/attention_mask.h"
#include "backend/cpu/cpu_attention_tile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_ FT_ATTN_TILE

typedef struct attn_geom {
    int batch, seq, n_heads, n_kv, hd, group, tiles;
    int window;       /* 0: none; else query i sees keys j > i - window */
    size_t q_stride;  /* floats per token in q, out, dout, dq: n_heads * head_dim */
    size_t kv_stride; /* floats per token in k, v, dk, dv: n_kv_heads * head_dim */
    float scale;
    const int32_t *segment; /* [batch * seq] or NULL */
} attn_geom;

static attn_geom attn_geom_of(ft_attn_shape s, const int32_t *segment)
{
    attn_geom g;
    g.batch = s.batch;
    g.seq = s.seq_len;
    g.n_heads = s.n_heads;
    g.n_kv = s.n_kv_heads;
    g.hd = s.head_dim;
    g.group = s.n_heads / s.n_kv_heads;
    g.tiles = (s.seq_len + T_ - 1) / T_;
    g.q_stride = (size_t)s.n_heads * (size_t)s.head_dim;
    g.kv_stride = (size_t)s.n_kv_heads * (size_t)s.head_dim;
    g.scale = 1.0f / sqrtf((float)s.head_dim);
    g.window = s.window > 0 ? s.window : 0;
    g.segment = segment;
    return g;
}

/* Row t of head `head` of batch row b in a [tokens, heads * head_dim] tensor. */
static size_t row_offset(const attn_geom *g, size_t stride, int b, int t, int head)
{
    return ((size_t)b * g->seq + (size_t)t) * stride + (size_t)head * g->hd;
}

/* Per-thread tiles: [hd x T_] transposed copies (one column per token) and
 * [T_ x hd] accumulators, plus two [T_ x T_] score tiles. */
typedef struct attn_scratch {
    float *block;        /* the single allocation the tiles are carved from */
    float *qt, *dot;     /* [hd x T_] (scale Q)^T, dO^T of a query block */
    float *kt, *vt;      /* [hd x T_] (scale K)^T, V^T of a key tile */
    float *acc;          /* [T_ x hd] O or dQ accumulator of a query block */
    float *dk, *dv;      /* [T_ x hd] dK, dV accumulators of a key tile */
    float *s, *dp;       /* [T_ x T_] scores -> probabilities, dP -> dS */
    float m[T_], l[T_], lse_eff[T_], D[T_];
} attn_scratch;

static void attn_scratch_init(attn_scratch *sc, int hd)
{
    size_t tile = (size_t)T_ * (size_t)hd;
    size_t bytes = (7 * tile + 2 * (size_t)T_ * T_) * sizeof(float);
    sc->block = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!sc->block) {
        fprintf(stderr, "ftmpi: CPU attention: out of memory for %zu bytes of tile scratch\n",
                bytes);
        abort();
    }
    float *p = sc->block;
    sc->qt = p, p += tile;
    sc->dot = p, p += tile;
    sc->kt = p, p += tile;
    sc->vt = p, p += tile;
    sc->acc = p, p += tile;
    sc->dk = p, p += tile;
    sc->dv = p, p += tile;
    sc->s = p, p += (size_t)T_ * T_;
    sc->dp = p;
}

/* Rows t0 .. t0+n-1 of head `head`, times mul, transposed into dst [hd x T_];
 * columns n .. T_-1 are zero. */
static void load_transposed(float *dst, const float *src, const attn_geom *g, size_t stride,
                            int b, int t0, int n, int head, float mul)
{
    int hd = g->hd;
    if (n < T_)
        memset(dst, 0, (size_t)hd * T_ * sizeof(float));
    for (int j = 0; j < n; j++) {
        const float *row = src + row_offset(g, stride, b, t0 + j, head);
        for (int c = 0; c < hd; c++)
            dst[(size_t)c * T_ + j] = row[c] * mul;
    }
}

static void store_rows(float *dst, const float *src, const attn_geom *g, size_t stride, int b,
                       int t0, int n, int head, float mul)
{
    int hd = g->hd;
    for (int i = 0; i < n; i++) {
        float *row = dst + row_offset(g, stride, b, t0 + i, head);
        const float *s = src + (size_t)i * hd;
#pragma omp simd
        for (int c = 0; c < hd; c++)
            row[c] = s[c] * mul;
    }
}

static int tile_len(const attn_geom *g, int t0)
{
    return g->seq - t0 < T_ ? g->seq - t0 : T_;
}

typedef struct seg_range {
    int32_t lo, hi;
} seg_range;

static seg_range segment_range(const attn_geom *g, int b, int t0, int n)
{
    seg_range r = {0, 0};
    if (!g->segment)
        return r;
    const int32_t *seg = g->segment + (size_t)b * g->seq + t0;
    r.lo = r.hi = seg[0];
    for (int i = 1; i < n; i++) {
        r.lo = seg[i] < r.lo ? seg[i] : r.lo;
        r.hi = seg[i] > r.hi ? seg[i] : r.hi;
    }
    return r;
}

/* False when no query of the block and key of the tile share a segment id. */
static bool segments_may_meet(const attn_geom *g, seg_range qr, seg_range kr)
{
    return !g->segment || (qr.lo <= kr.hi && kr.lo <= qr.hi);
}

/* False when every key of tile [k0, k0+kn) is outside the sliding window of every
 * query of block [q0, ...): the last key k0+kn-1 <= q0 - window, the first query's
 * lower edge (later queries' edges are higher still). */
static bool window_may_meet(const attn_geom *g, int q0, int k0, int kn)
{
    return !ft_mask_tile_before_window(q0, k0, kn, g->window);
}

/* Sets the score of every invisible (query i, key j) pair of a tile to -inf:
 * keys after the query (k0 + j > q0 + i), keys of another document and keys at
 * or before q0 + i - window. The score of pair (i, j) is s[i * i_stride + j *
 * j_stride] (S or S^T layout). Tiles fully below the diagonal, inside one
 * document and inside every query's window need nothing. */
static void mask_tile(float *s, size_t i_stride, size_t j_stride, const attn_geom *g, int b,
                      int q0, int qn, seg_range qr, int k0, int kn, seg_range kr)
{
    bool one_doc = !g->segment || (qr.lo == qr.hi && kr.lo == kr.hi && qr.lo == kr.lo);
    bool in_window = ft_mask_tile_inside_window(q0, qn, k0, g->window);
    if (one_doc && ft_mask_tile_all_seen(q0, qn, k0, kn, g->window))
        return;
    const int32_t *seg = g->segment ? g->segment + (size_t)b * g->seq : NULL;
    for (int i = 0; i < qn; i++) {
        int qi = q0 + i;
        float *si = s + (size_t)i * i_stride;
        int visible_end = qi - k0 + 1; /* keys j < visible_end satisfy k0 + j <= qi */
        visible_end = visible_end > kn ? kn : visible_end < 0 ? 0 : visible_end;
        for (int j = visible_end; j < kn; j++)
            si[(size_t)j * j_stride] = -INFINITY;
        if (!in_window) { /* keys j with k0 + j < the query's first key */
            int window_start = ft_mask_first_key(qi, g->window) - k0;
            window_start = window_start > visible_end ? visible_end : window_start;
            for (int j = 0; j < window_start; j++)
                si[(size_t)j * j_stride] = -INFINITY;
        }
        if (seg && !one_doc) {
            int32_t sq = seg[qi];
            for (int j = 0; j < visible_end; j++)
                if (seg[k0 + j] != sq)
                    si[(size_t)j * j_stride] = -INFINITY;
        }
    }
}

/* A key tile as a query block sees it: its kn keys' rows of K and V. */
typedef struct key_tile {
    int kn;
    const float *k, *v;
} key_tile;

/* Key tile kb for query block [q0, q0 + qn) of batch b (segment range qr, scaled Q^T in
 * sc->qt) and its kv head kvh. False when no query of the block can see any key of the
 * tile, which is then skipped; else *kt, and in sc->s the masked scores
 * S^T [kn x T_] = K (scale Q)^T. The forward and the dQ pass both walk a query block's
 * key tiles in this layout, and differ only after the scores. */
static bool key_tile_scores_t(const ft_attn_tile_kernels *K, attn_scratch *sc, const attn_geom *g,
                              const float *k, const float *v, int b, int kvh, int q0, int qn,
                              seg_range qr, int kb, key_tile *kt)
{
    int k0 = kb * T_, kn = tile_len(g, k0);
    seg_range kr = segment_range(g, b, k0, kn);
    if (!segments_may_meet(g, qr, kr) || !window_may_meet(g, q0, k0, kn))
        return false;
    kt->kn = kn;
    kt->k = k + row_offset(g, g->kv_stride, b, k0, kvh);
    kt->v = v + row_offset(g, g->kv_stride, b, k0, kvh);
    memset(sc->s, 0, sizeof(float) * T_ * T_);
    K->gemm_acc(sc->s, T_, kt->k, g->kv_stride, 1, sc->qt, T_, kn, T_, g->hd);
    mask_tile(sc->s, 1, T_, g, b, q0, qn, qr, k0, kn, kr);
    return true;
}

static void fwd_query_block(const ft_attn_tile_kernels *K, attn_scratch *sc, const attn_geom *g,
                            float *out, float *lse, const float *q, const float *k,
                            const float *v, int b, int h, int qb)
{
    int hd = g->hd, kvh = h / g->group;
    int q0 = qb * T_, qn = tile_len(g, q0);
    seg_range qr = segment_range(g, b, q0, qn);
    load_transposed(sc->qt, q, g, g->q_stride, b, q0, qn, h, g->scale);
    memset(sc->acc, 0, (size_t)T_ * hd * sizeof(float));
    for (int i = 0; i < T_; i++)
        sc->m[i] = -INFINITY, sc->l[i] = 0.0f;

    int end_kb = ft_mask_end_key_tile(q0, qn, T_);
    for (int kb = 0; kb < end_kb; kb++) {
        key_tile kt;
        if (!key_tile_scores_t(K, sc, g, k, v, b, kvh, q0, qn, qr, kb, &kt))
            continue;
        K->online_softmax_t(sc->s, kt.kn, sc->m, sc->l, sc->acc, hd);
        /* acc [T_ x hd] += P V, P(i, j) = S^T[j][i] */
        K->gemm_acc(sc->acc, hd, sc->s, 1, T_, kt.v, g->kv_stride, T_, hd, kt.kn);
    }

    float *lse_row = lse + ((size_t)b * g->n_heads + h) * g->seq + q0;
    for (int i = 0; i < qn; i++) {
        float li = sc->l[i];
        float inv = li > 0.0f ? 1.0f / li : 0.0f;
        lse_row[i] = li > 0.0f ? sc->m[i] + logf(li) : -INFINITY;
        float *a = sc->acc + (size_t)i * hd;
#pragma omp simd
        for (int c = 0; c < hd; c++)
            a[c] *= inv;
    }
    store_rows(out, sc->acc, g, g->q_stride, b, q0, qn, h, 1.0f);
}

void ft_cpu_attention_fwd(ft_backend *be, float *out, float *lse, const float *q, const float *k,
                          const float *v, const int32_t *segment, ft_attn_shape s)
{
    if (s.batch <= 0 || s.seq_len <= 0 || s.n_heads <= 0)
        return;
    const ft_attn_tile_kernels *K = ft_cpu_attn_tile_kernels(ft_cpu_isa_of(be));
    attn_geom g = attn_geom_of(s, segment);
    long tasks = (long)g.batch * g.n_heads * g.tiles;
#pragma omp parallel if (tasks > 1)
    {
        attn_scratch sc;
        attn_scratch_init(&sc, g.hd);
        /* Later query blocks see more keys: hand them out first. */
#pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < tasks; t++) {
            int qb = g.tiles - 1 - (int)(t % g.tiles);
            long bh = t / g.tiles;
            fwd_query_block(K, &sc, &g, out, lse, q, k, v, (int)(bh / g.n_heads),
                            (int)(bh % g.n_heads), qb);
        }
        free(sc.block);
    }
}

/* lse of a query block with -inf (no visible key; also the padding rows) turned
 * into +inf, so that exp(s - lse_eff) is 0 there, and D of the block. */
static void load_row_stats(attn_scratch *sc, const attn_geom *g, const float *lse,
                           const float *D, int b, int h, int q0, int qn)
{
    size_t off = ((size_t)b * g->n_heads + h) * g->seq + q0;
    for (int i = 0; i < T_; i++) {
        float li = i < qn ? lse[off + i] : -INFINITY;
        sc->lse_eff[i] = li == -INFINITY ? INFINITY : li;
        sc->D[i] = i < qn ? D[off + i] : 0.0f;
    }
}

/* Pass 1: dK, dV of key tile kb of kv head kvh, summed over the query heads of
 * its group and over every query block that can see the tile. Layout S. */
static void bwd_key_tile(const ft_attn_tile_kernels *K, attn_scratch *sc, const attn_geom *g,
                         float *dk, float *dv, const float *dout, const float *lse,
                         const float *D, const float *q, const float *k, const float *v, int b,
                         int kvh, int kb)
{
    int hd = g->hd;
    int k0 = kb * T_, kn = tile_len(g, k0);
    seg_range kr = segment_range(g, b, k0, kn);
    load_transposed(sc->kt, k, g, g->kv_stride, b, k0, kn, kvh, g->scale);
    load_transposed(sc->vt, v, g, g->kv_stride, b, k0, kn, kvh, 1.0f);
    memset(sc->dk, 0, (size_t)T_ * hd * sizeof(float));
    memset(sc->dv, 0, (size_t)T_ * hd * sizeof(float));
    for (int gi = 0; gi < g->group; gi++) {
        int h = kvh * g->group + gi;
        for (int qb = kb; qb < g->tiles; qb++) { /* earlier query blocks precede the keys */
            int q0 = qb * T_, qn = tile_len(g, q0);
            seg_range qr = segment_range(g, b, q0, qn);
            if (!window_may_meet(g, q0, k0, kn))
                break; /* later query blocks are further past the window */
            if (!segments_may_meet(g, qr, kr))
                continue;
            const float *qr0 = q + row_offset(g, g->q_stride, b, q0, h);
            const float *dor0 = dout + row_offset(g, g->q_stride, b, q0, h);
            load_row_stats(sc, g, lse, D, b, h, q0, qn);
            /* S [qn x kn] = Q (scale K)^T -> P */
            memset(sc->s, 0, sizeof(float) * T_ * T_);
            K->gemm_acc(sc->s, T_, qr0, g->q_stride, 1, sc->kt, T_, qn, kn, hd);
            mask_tile(sc->s, T_, 1, g, b, q0, qn, qr, k0, kn, kr);
            K->probs_rows(sc->s, qn, kn, sc->lse_eff);
            /* dP [qn x kn] = dO V^T -> dS */
            memset(sc->dp, 0, sizeof(float) * T_ * T_);
            K->gemm_acc(sc->dp, T_, dor0, g->q_stride, 1, sc->vt, T_, qn, kn, hd);
            K->dscores_rows(sc->dp, sc->s, qn, kn, sc->D);
            /* dV_j += sum_i P_ij dO_i, dK_j += sum_i dS_ij q_i (scale applied at the
             * store); P and dS are read transposed, A(j, i) = P[i][j]. */
            K->gemm_acc(sc->dv, hd, sc->s, 1, T_, dor0, g->q_stride, kn, hd, qn);
            K->gemm_acc(sc->dk, hd, sc->dp, 1, T_, qr0, g->q_stride, kn, hd, qn);
        }
    }
    store_rows(dk, sc->dk, g, g->kv_stride, b, k0, kn, kvh, g->scale);
    store_rows(dv, sc->dv, g, g->kv_stride, b, k0, kn, kvh, 1.0f);
}

/* Pass 2: dQ of query block qb of head h, summed over the key tiles it sees.
 * Layout S^T. */
static void bwd_query_block(const ft_attn_tile_kernels *K, attn_scratch *sc, const attn_geom *g,
                            float *dq, const float *dout, const float *lse, const float *D,
                            const float *q, const float *k, const float *v, int b, int h, int qb)
{
    int hd = g->hd, kvh = h / g->group;
    int q0 = qb * T_, qn = tile_len(g, q0);
    seg_range qr = segment_range(g, b, q0, qn);
    load_transposed(sc->qt, q, g, g->q_stride, b, q0, qn, h, g->scale);
    load_transposed(sc->dot, dout, g, g->q_stride, b, q0, qn, h, 1.0f);
    load_row_stats(sc, g, lse, D, b, h, q0, qn);
    memset(sc->acc, 0, (size_t)T_ * hd * sizeof(float));
    int end_kb = ft_mask_end_key_tile(q0, qn, T_);
    for (int kb = 0; kb < end_kb; kb++) {
        key_tile kt;
        if (!key_tile_scores_t(K, sc, g, k, v, b, kvh, q0, qn, qr, kb, &kt))
            continue;
        K->probs_cols(sc->s, kt.kn, sc->lse_eff); /* S^T -> P^T */
        /* dP^T [kn x T_] = V dO^T -> dS^T */
        memset(sc->dp, 0, sizeof(float) * T_ * T_);
        K->gemm_acc(sc->dp, T_, kt.v, g->kv_stride, 1, sc->dot, T_, kt.kn, T_, hd);
        K->dscores_cols(sc->dp, sc->s, kt.kn, sc->D);
        /* dQ [T_ x hd] += dS K (scale applied at the store), dS(i, j) = dS^T[j][i] */
        K->gemm_acc(sc->acc, hd, sc->dp, 1, T_, kt.k, g->kv_stride, T_, hd, kt.kn);
    }
    store_rows(dq, sc->acc, g, g->q_stride, b, q0, qn, h, g->scale);
}

void ft_cpu_attention_bwd(ft_backend *be, float *dq, float *dk, float *dv, const float *dout,
                          const float *out, const float *lse, const float *q, const float *k,
                          const float *v, const int32_t *segment, ft_attn_shape s)
{
    if (s.batch <= 0 || s.seq_len <= 0 || s.n_heads <= 0)
        return;
    const ft_attn_tile_kernels *K = ft_cpu_attn_tile_kernels(ft_cpu_isa_of(be));
    attn_geom g = attn_geom_of(s, segment);
    long tokens = (long)g.batch * g.seq;
    long key_tasks = (long)g.batch * g.n_kv * g.tiles;
    long query_tasks = (long)g.batch * g.n_heads * g.tiles;
    /* D [batch, n_heads, seq] = rowsum(dO o O), laid out like lse. */
    float *D = malloc((size_t)tokens * g.n_heads * sizeof(float));
    if (!D) {
        fprintf(stderr, "ftmpi: CPU attention: out of memory for D\n");
        abort();
    }
#pragma omp parallel if (query_tasks > 1)
    {
#pragma omp for schedule(static)
        for (long t = 0; t < tokens; t++) {
            int b = (int)(t / g.seq), i = (int)(t % g.seq);
            for (int h = 0; h < g.n_heads; h++) {
                const float *o = out + row_offset(&g, g.q_stride, b, i, h);
                const float *d_o = dout + row_offset(&g, g.q_stride, b, i, h);
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int c = 0; c < g.hd; c++)
                    sum += d_o[c] * o[c];
                D[((size_t)b * g.n_heads + h) * g.seq + i] = sum;
            }
        }
        attn_scratch sc;
        attn_scratch_init(&sc, g.hd);
        /* Earlier key tiles are seen by more queries: hand them out first. */
#pragma omp for schedule(dynamic, 1) nowait
        for (long t = 0; t < key_tasks; t++) {
            int kb = (int)(t % g.tiles);
            long bk = t / g.tiles;
            bwd_key_tile(K, &sc, &g, dk, dv, dout, lse, D, q, k, v, (int)(bk / g.n_kv),
                         (int)(bk % g.n_kv), kb);
        }
#pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < query_tasks; t++) {
            int qb = g.tiles - 1 - (int)(t % g.tiles);
            long bh = t / g.tiles;
            bwd_query_block(K, &sc, &g, dq, dout, lse, D, q, k, v, (int)(bh / g.n_heads),
                            (int)(bh % g.n_heads), qb);
        }
        free(sc.block);
    }
    free(D);
}
