/* Flash attention in fp32 on CUDA cores: causal, document-masked, grouped-query,
 * never materialising the [T x T] score matrix.
 *
 * Notation for one (batch row b, query head h): q_i, k_j, v_j, o_i are head_dim
 * vectors, scale = 1/sqrt(head_dim), s_ij = scale q_i.k_j, and query i sees key
 * j iff j <= i and segment[j] == segment[i] (vis(i, j)). Query head h reads kv
 * head h / group (group = n_heads / n_kv_heads) by indexing: K/V are never
 * copied.
 *
 * Forward (one block per (query tile, head, batch row)), over key tiles with an
 * online softmax:
 *   m_i   = running max of s_ij,  l_i = running sum of exp(s_ij - m_i),
 *   acc_i = running sum of exp(s_ij - m_i) v_j;
 *   a tile that raises the max to m'_i rescales l_i and acc_i by exp(m_i - m'_i).
 *   At the end o_i = acc_i / l_i and lse_i = m_i + log(l_i). A row that sees
 *   nothing (impossible with a causal mask, where i sees itself) gets o_i = 0 and
 *   lse_i = -inf. Scores are kept in base 2 (q is multiplied by scale*log2(e) on
 *   load, exp2 replaces exp): lse_i = ln2 * (m2_i + log2(l_i)).
 *
 * Backward, with p_ij = exp(s_ij - lse_i) recomputed from the saved lse:
 *   D_i   = sum_d dO_id O_id                   (pre-kernel; = sum_j p_ij dP_ij)
 *   dP_ij = dO_i . v_j,   dS_ij = p_ij (dP_ij - D_i)
 *   dV_j  = sum_i p_ij dO_i,  dK_j = scale sum_i dS_ij q_i,  dQ_i = scale sum_j dS_ij k_j
 * dQ sums over keys and dK/dV over queries; computing both from the same tiles
 * would need atomics on one of them. Instead two kernels each own their outputs:
 * the dK/dV kernel runs one block per (key tile, kv head, batch row) and walks
 * every query tile of every query head of its group (the GQA sum happens inside
 * the block); the dQ kernel runs one block per (query tile, head, batch row)
 * over the key tiles. S and dP are computed twice (7 tile products instead of 5)
 * in exchange for no atomics and bit-reproducible results: every output element
 * is summed in a fixed order by one thread.
 *
 * Tiling. Every kernel runs 256 threads as a 16 x 16 grid (tx = thread % 16,
 * ty = thread / 16). A block owns BR "row" tokens (queries, or keys in the dK/dV
 * kernel) and streams tiles of BC "column" tokens. Thread (tx, ty) owns rows
 * ty*RR .. ty*RR+RR-1 (RR = BR/16) and, in score tiles, columns tx + 16c
 * (c < BC/16); in output tiles it owns feature columns tx + 16c (c < HDMAX/16).
 * So the accumulators (O, dQ, or dK and dV) live in registers and a row's
 * softmax statistics are reduced with shuffles among the 16 lanes sharing it.
 * Operands are staged in shared memory:
 *  - token tiles used as dot-product operands are stored transposed, Xt[d][t],
 *    with an odd row pitch (t + 1): the global loads are coalesced along d, the
 *    transposed stores are bank-conflict free, reads along t by consecutive lanes
 *    are conflict free, and reads of a thread's own rows are broadcasts;
 *  - the probability tile goes through shared memory between the two products
 *    (S -> P, then P V), also transposed with an odd pitch.
 * The tile sizes are template parameters, chosen per head-dim class (64, 128,
 * 256: any head_dim up to the class maximum works, the loops over d run to the
 * actual head_dim) so that shared memory stays within what sm_80 offers
 * (<= 163 KB, opted in with cudaFuncSetAttribute). The float type of the staged
 * tiles and the inner products are isolated in the load and micro-kernel loops,
 * so a bf16 tensor-core version can replace them later.
 *
 * Masking. Key tiles past the query tile's diagonal are never visited (causal
 * loop bound). With segment ids, a pre-kernel stores the [min, max] segment id
 * of every granule of 16 tokens; a tile pair whose ranges do not intersect
 * cannot contain a visible pair and is skipped (with increasing ids per packed
 * row this skips every tile before the query's document). Tile pairs entirely
 * below the diagonal and inside one document need no element-wise mask.
 * With a sliding window W (Mistral; query i also needs key j > i - W), tile
 * pairs whose last key is at or before the first query minus W are skipped, and
 * every other pair takes the element-wise mask. The rule itself (which keys a
 * query sees, which tiles meet) is src/backend/attention_mask.h's.
 *
 * Everything runs on the backend's stream; the only temporary memory (segment
 * ranges, D) comes from the caller's scratch. */
#include "cuda_common.cuh"

#include "backend/attention_mask.h"

#include <limits.h>

#define ATT_THREADS 256
#define ATT_GRAN 16
#define ATT_LOG2E 1.4426950408889634f
#define ATT_LN2 0.6931471805599453f

struct AttnArgs {
    int batch, seq, n_heads, n_kv, hd, group;
    size_t q_stride;  /* floats per token in q, out, dq, dout: n_heads * head_dim */
    size_t kv_stride; /* floats per token in k, v, dk, dv: n_kv_heads * head_dim */
    float scale;      /* 1/sqrt(head_dim) */
    float scale_log2; /* scale * log2(e): scores in base 2 */
    const int32_t *segment; /* [batch * seq] or NULL */
    const int2 *seg_range;  /* [batch][ngran] (min, max) of each granule, or NULL */
    int ngran;
    int window;             /* 0: none; else query i sees only keys j > i - window */
};

/* ---------------------------------------------------------------- helpers */

/* Segment range of each granule of ATT_GRAN tokens (valid tokens only). */
__global__ void attn_seg_range_kernel(int2 *range, const int32_t *segment, int batch, int seq,
                                      int ngran)
{
    size_t total = (size_t)batch * ngran;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        int b = (int)(idx / ngran), g = (int)(idx % ngran);
        int t0 = g * ATT_GRAN, t1 = min(t0 + ATT_GRAN, seq);
        int lo = INT_MAX, hi = INT_MIN;
        for (int t = t0; t < t1; t++) {
            int s = segment[(size_t)b * seq + t];
            lo = min(lo, s);
            hi = max(hi, s);
        }
        range[idx] = make_int2(lo, hi);
    }
}

/* [min, max] segment id over tokens t0 .. t0+n-1 (clipped to seq) of row b.
 * Every thread reads the same few entries (broadcast); the result is uniform. */
__device__ __forceinline__ int2 attn_tile_range(const AttnArgs &a, int b, int t0, int n)
{
    int g0 = t0 / ATT_GRAN, g1 = (min(t0 + n, a.seq) - 1) / ATT_GRAN;
    int lo = INT_MAX, hi = INT_MIN;
    for (int g = g0; g <= g1; g++) {
        int2 r = a.seg_range[(size_t)b * a.ngran + g];
        lo = min(lo, r.x);
        hi = max(hi, r.y);
    }
    return make_int2(lo, hi);
}

/* Tile pair classification: 0 = skip (no visible pair can exist), 1 = needs the
 * element-wise mask, 2 = every (query, key) pair of the tile is visible. q0/k0
 * are the first tokens, kn the valid keys of a tile of bk; only a complete key
 * tile (kn == bk) can be fully visible, so that no padding key enters the
 * softmax. Requires k0 <= last valid query (the caller's loop bounds). */
__device__ __forceinline__ int attn_classify(const AttnArgs &a, int b, int q0, int k0, int kn,
                                             int bk, int2 qr)
{
    if (ft_mask_tile_before_window(q0, k0, kn, a.window))
        return 0;
    bool full = (k0 + kn - 1 <= q0) && kn == bk && a.window == 0;
    if (a.segment) {
        int2 kr = attn_tile_range(a, b, k0, kn);
        if (kr.y < qr.x || kr.x > qr.y)
            return 0;
        full = full && kr.x == kr.y && qr.x == qr.y && kr.x == qr.x;
    }
    return full ? 2 : 1;
}

/* The backward's two inner products for this thread's R rows x C columns of a
 * tile pair: s = A^T B and dp = A2^T B2 over hd features, where A, A2 are staged
 * [hd][RA+1] (rows ty*R + r) and B, B2 [hd][RB+1] (columns tx + 16c). The dQ pass
 * reads (Q, K, dO, V), the dK/dV pass the transposes (K, Q, V, dO): one loop. */
template <int R, int C, int RA, int RB>
__device__ __forceinline__ void attn_two_products(float (&s)[R][C], float (&dp)[R][C],
                                                  const float *A, const float *B,
                                                  const float *A2, const float *B2, int hd,
                                                  int ty, int tx)
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < C; c++)
            s[r][c] = dp[r][c] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < hd; d++) {
        float av[R], a2v[R], bv[C], b2v[C];
#pragma unroll
        for (int r = 0; r < R; r++) {
            av[r] = A[d * (RA + 1) + ty * R + r];
            a2v[r] = A2[d * (RA + 1) + ty * R + r];
        }
#pragma unroll
        for (int c = 0; c < C; c++) {
            bv[c] = B[d * (RB + 1) + tx + 16 * c];
            b2v[c] = B2[d * (RB + 1) + tx + 16 * c];
        }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < C; c++) {
                s[r][c] = fmaf(av[r], bv[c], s[r][c]);
                dp[r][c] = fmaf(a2v[r], b2v[c], dp[r][c]);
            }
    }
}

/* Loads rows t0 .. t0+n-1 of one head (hd features, row pitch `stride` floats in
 * global memory) into Xt[d][t] (pitch R+1), times mul. Rows >= n and features
 * >= hd are zero. Consecutive threads read consecutive features (coalesced);
 * the transposed stores hit distinct banks (odd pitch). */
template <int HDMAX, int R>
__device__ __forceinline__ void attn_load_t(float *__restrict__ xt, const float *__restrict__ base,
                                            size_t stride, int t0, int n, int hd, float mul)
{
    for (int idx = threadIdx.x; idx < R * HDMAX; idx += ATT_THREADS) {
        int t = idx / HDMAX, d = idx % HDMAX;
        float val = 0.0f;
        if (t < n && d < hd)
            val = base[(size_t)(t0 + t) * stride + d] * mul;
        xt[d * (R + 1) + t] = val;
    }
}

/* Same rows, row-major X[t][d] (pitch HDMAX). */
template <int HDMAX, int R>
__device__ __forceinline__ void attn_load_rows(float *__restrict__ x,
                                               const float *__restrict__ base, size_t stride,
                                               int t0, int n, int hd)
{
    for (int idx = threadIdx.x; idx < R * HDMAX; idx += ATT_THREADS) {
        int t = idx / HDMAX, d = idx % HDMAX;
        x[idx] = (t < n && d < hd) ? base[(size_t)(t0 + t) * stride + d] : 0.0f;
    }
}

__device__ __forceinline__ float attn_max16(float v)
{
#pragma unroll
    for (int off = 8; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FT_FULL_MASK, v, off));
    return v;
}

__device__ __forceinline__ float attn_sum16(float v)
{
#pragma unroll
    for (int off = 8; off > 0; off >>= 1)
        v += __shfl_xor_sync(FT_FULL_MASK, v, off);
    return v;
}

__device__ __forceinline__ int attn_seg(const AttnArgs &a, int b, int t)
{
    return (a.segment && t < a.seq) ? a.segment[(size_t)b * a.seq + t] : 0;
}

/* ---------------------------------------------------------------- forward */

template <int HDMAX, int BQ, int BK>
struct AttnFwdCfg {
    static constexpr int RQ = BQ / 16, CK = BK / 16, CD = HDMAX / 16;
    static constexpr size_t floats =
        (size_t)HDMAX * (BQ + 1) + (size_t)HDMAX * (BK + 1) + (size_t)BK * HDMAX +
        (size_t)BK * (BQ + 1);
    static constexpr size_t smem = floats * sizeof(float) + BK * sizeof(int);
};

template <int HDMAX, int BQ, int BK>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_fwd_kernel(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ q,
                    const float *__restrict__ k, const float *__restrict__ v, AttnArgs a)
{
    typedef AttnFwdCfg<HDMAX, BQ, BK> C;
    constexpr int RQ = C::RQ, CK = C::CK, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Qt = smem;                     /* [HDMAX][BQ+1], q * scale * log2e */
    float *Kt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BK+1] */
    float *Vs = Kt + HDMAX * (BK + 1);    /* [BK][HDMAX] */
    float *Pt = Vs + BK * HDMAX;          /* [BK][BQ+1] probabilities, transposed */
    int *segk = (int *)(Pt + BK * (BQ + 1)); /* [BK] */

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x; /* the longest rows first */
    const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int hd = a.hd, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;

    attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, a.scale_log2);
    int segq[RQ];
#pragma unroll
    for (int r = 0; r < RQ; r++)
        segq[r] = attn_seg(a, b, q0 + ty * RQ + r);
    int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);

    float m[RQ], l[RQ], o[RQ][CD];
#pragma unroll
    for (int r = 0; r < RQ; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < CD; c++)
            o[r][c] = 0.0f;
    }

    const int nkt = ft_mask_end_key_tile(q0, qn, BK);
    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BK, kn = min(BK, a.seq - k0);
        const int kind = attn_classify(a, b, q0, k0, kn, BK, qr);
        if (kind == 0)
            continue; /* uniform over the block */
        __syncthreads(); /* the previous tile's Kt/Vs/Pt are no longer read */
        attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
        attn_load_rows<HDMAX, BK>(Vs, vb, a.kv_stride, k0, kn, hd);
        if (threadIdx.x < BK)
            segk[threadIdx.x] = attn_seg(a, b, k0 + threadIdx.x);
        __syncthreads();

        /* S = Q K^T for this thread's RQ x CK scores. */
        float s[RQ][CK];
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++)
                s[r][c] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < hd; d++) {
            float qv[RQ], kv[CK];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                qv[r] = Qt[d * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CK; c++)
                kv[c] = Kt[d * (BK + 1) + tx + 16 * c];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CK; c++)
                    s[r][c] = fmaf(qv[r], kv[c], s[r][c]);
        }
        if (kind == 1) {
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CK; c++) {
                    int i = q0 + ty * RQ + r, jl = tx + 16 * c, j = k0 + jl;
                    bool vis = ft_mask_sees(i, j, a.window) && jl < kn &&
                               (!a.segment || segk[jl] == segq[r]);
                    if (!vis)
                        s[r][c] = -INFINITY;
                }
        }

        /* Online softmax: new running max, rescale, probabilities. */
#pragma unroll
        for (int r = 0; r < RQ; r++) {
            float mx = s[r][0];
#pragma unroll
            for (int c = 1; c < CK; c++)
                mx = fmaxf(mx, s[r][c]);
            mx = attn_max16(mx);
            float m_new = fmaxf(m[r], mx);
            /* A row that has seen nothing yet keeps m = -inf: use 0 as the
             * reference so that exp2(-inf - ref) = 0 instead of NaN. */
            float ref = m_new == -INFINITY ? 0.0f : m_new;
            float alpha = exp2f(m[r] - ref);
            m[r] = m_new;
            float ls = 0.0f;
#pragma unroll
            for (int c = 0; c < CK; c++) {
                float p = exp2f(s[r][c] - ref);
                s[r][c] = p;
                ls += p;
            }
            l[r] = l[r] * alpha + ls; /* per-thread partial; reduced at the end */
#pragma unroll
            for (int c = 0; c < CD; c++)
                o[r][c] *= alpha;
        }
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++)
                Pt[(tx + 16 * c) * (BQ + 1) + ty * RQ + r] = s[r][c];
        __syncthreads();

        /* O += P V. */
#pragma unroll 4
        for (int j = 0; j < kn; j++) {
            float pv[RQ], vv[CD];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                pv[r] = Pt[j * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CD; c++)
                vv[c] = Vs[j * HDMAX + tx + 16 * c];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CD; c++)
                    o[r][c] = fmaf(pv[r], vv[c], o[r][c]);
        }
    }

#pragma unroll
    for (int r = 0; r < RQ; r++) {
        float lt = attn_sum16(l[r]);
        int i = q0 + ty * RQ + r;
        if (i < a.seq) {
            float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
            float *orow = out + ((size_t)b * a.seq + i) * a.q_stride + (size_t)h * hd;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                int d = tx + 16 * c;
                if (d < hd)
                    orow[d] = o[r][c] * inv;
            }
            if (tx == 0)
                lse[((size_t)b * a.n_heads + h) * a.seq + i] =
                    lt > 0.0f ? (m[r] + log2f(lt)) * ATT_LN2 : -INFINITY;
        }
    }
}

/* ---------------------------------------------------------------- backward */

/* D[b][h][i] = sum_d dO[b,i,h,d] * O[b,i,h,d]: one warp per (b, i, h). */
__global__ void attn_bwd_dot_kernel(float *__restrict__ Dv, const float *__restrict__ dout,
                                    const float *__restrict__ out, AttnArgs a)
{
    size_t rows = (size_t)a.batch * a.seq * a.n_heads;
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / FT_WARP;
    size_t nwarps = (size_t)gridDim.x * blockDim.x / FT_WARP;
    int lane = threadIdx.x % FT_WARP;
    for (size_t r = warp; r < rows; r += nwarps) {
        /* r = (b*seq + i)*n_heads + h: the order of the q/out layout. */
        size_t token = r / a.n_heads;
        int h = (int)(r % a.n_heads);
        const float *d0 = dout + token * a.q_stride + (size_t)h * a.hd;
        const float *o0 = out + token * a.q_stride + (size_t)h * a.hd;
        float acc = 0.0f;
        for (int d = lane; d < a.hd; d += FT_WARP)
            acc = fmaf(d0[d], o0[d], acc);
        acc = ft_warp_sum(acc);
        if (lane == 0) {
            int b = (int)(token / a.seq), i = (int)(token % a.seq);
            Dv[((size_t)b * a.n_heads + h) * a.seq + i] = acc;
        }
    }
}

/* lse in base 2, with -inf (a row that saw nothing) mapped to +inf so that
 * p = exp2(s - lse2) = 0 there. */
__device__ __forceinline__ float attn_lse2(float lse_nat)
{
    return lse_nat == -INFINITY ? INFINITY : lse_nat * ATT_LOG2E;
}

template <int HDMAX, int BQ, int BK>
struct AttnDqCfg {
    static constexpr int RQ = BQ / 16, CK = BK / 16, CD = HDMAX / 16;
    static constexpr size_t floats = 2 * (size_t)HDMAX * (BQ + 1) + 2 * (size_t)HDMAX * (BK + 1) +
                                     (size_t)BK * (BQ + 1);
    static constexpr size_t smem = floats * sizeof(float) + BK * sizeof(int);
};

/* dQ_i = scale * sum_j dS_ij k_j; one block per (query tile, head, batch row). */
template <int HDMAX, int BQ, int BK>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dq_kernel(float *__restrict__ dq, const float *__restrict__ dout,
                       const float *__restrict__ lse, const float *__restrict__ Dv,
                       const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, AttnArgs a)
{
    typedef AttnDqCfg<HDMAX, BQ, BK> C;
    constexpr int RQ = C::RQ, CK = C::CK, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Qt = smem;                      /* [HDMAX][BQ+1] raw q */
    float *dOt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BQ+1] */
    float *Kt = dOt + HDMAX * (BQ + 1);    /* [HDMAX][BK+1] */
    float *Vt = Kt + HDMAX * (BK + 1);     /* [HDMAX][BK+1] */
    float *dSt = Vt + HDMAX * (BK + 1);    /* [BK][BQ+1] */
    int *segk = (int *)(dSt + BK * (BQ + 1));

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int hd = a.hd, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *dob = dout + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const size_t row_stat = ((size_t)b * a.n_heads + h) * a.seq;

    attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, 1.0f);
    attn_load_t<HDMAX, BQ>(dOt, dob, a.q_stride, q0, qn, hd, 1.0f);
    int segq[RQ];
    float lse2[RQ], Dr[RQ], acc[RQ][CD];
#pragma unroll
    for (int r = 0; r < RQ; r++) {
        int i = q0 + ty * RQ + r;
        segq[r] = attn_seg(a, b, i);
        lse2[r] = i < a.seq ? attn_lse2(lse[row_stat + i]) : INFINITY;
        Dr[r] = i < a.seq ? Dv[row_stat + i] : 0.0f;
#pragma unroll
        for (int c = 0; c < CD; c++)
            acc[r][c] = 0.0f;
    }
    int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);

    const int nkt = ft_mask_end_key_tile(q0, qn, BK);
    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BK, kn = min(BK, a.seq - k0);
        const int kind = attn_classify(a, b, q0, k0, kn, BK, qr);
        if (kind == 0)
            continue;
        __syncthreads();
        attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
        attn_load_t<HDMAX, BK>(Vt, vb, a.kv_stride, k0, kn, hd, 1.0f);
        if (threadIdx.x < BK)
            segk[threadIdx.x] = attn_seg(a, b, k0 + threadIdx.x);
        __syncthreads();

        float s[RQ][CK], dp[RQ][CK];
        attn_two_products<RQ, CK, BQ, BK>(s, dp, Qt, Kt, dOt, Vt, hd, ty, tx);
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++) {
                int i = q0 + ty * RQ + r, jl = tx + 16 * c, j = k0 + jl;
                bool vis = kind == 2 || (ft_mask_sees(i, j, a.window) && jl < kn &&
                                         (!a.segment || segk[jl] == segq[r]));
                float p = vis ? exp2f(s[r][c] * a.scale_log2 - lse2[r]) : 0.0f;
                dSt[jl * (BQ + 1) + ty * RQ + r] = p * (dp[r][c] - Dr[r]);
            }
        __syncthreads();

#pragma unroll 4
        for (int j = 0; j < kn; j++) {
            float sv[RQ], kv[CD];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                sv[r] = dSt[j * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CD; c++)
                kv[c] = Kt[(tx + 16 * c) * (BK + 1) + j];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CD; c++)
                    acc[r][c] = fmaf(sv[r], kv[c], acc[r][c]);
        }
    }

#pragma unroll
    for (int r = 0; r < RQ; r++) {
        int i = q0 + ty * RQ + r;
        if (i >= a.seq)
            continue;
        float *row = dq + ((size_t)b * a.seq + i) * a.q_stride + (size_t)h * hd;
#pragma unroll
        for (int c = 0; c < CD; c++) {
            int d = tx + 16 * c;
            if (d < hd)
                row[d] = acc[r][c] * a.scale;
        }
    }
}

template <int HDMAX, int BK, int BQ>
struct AttnDkvCfg {
    static constexpr int RK = BK / 16, CQ = BQ / 16, CD = HDMAX / 16;
    static constexpr size_t floats = 2 * (size_t)HDMAX * (BK + 1) + 2 * (size_t)HDMAX * (BQ + 1) +
                                     2 * (size_t)BQ * (BK + 1) + 2 * (size_t)BQ;
    static constexpr size_t smem = floats * sizeof(float) + BQ * sizeof(int);
};

/* dV_j = sum_i p_ij dO_i, dK_j = scale * sum_i dS_ij q_i; one block per
 * (key tile, kv head, batch row), summing over the query heads of the group and
 * all query tiles at or after the key tile (causality) in a fixed order. */
template <int HDMAX, int BK, int BQ>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dkv_kernel(float *__restrict__ dk, float *__restrict__ dv,
                        const float *__restrict__ dout, const float *__restrict__ lse,
                        const float *__restrict__ Dv, const float *__restrict__ q,
                        const float *__restrict__ k, const float *__restrict__ v, AttnArgs a)
{
    typedef AttnDkvCfg<HDMAX, BK, BQ> C;
    constexpr int RK = C::RK, CQ = C::CQ, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Kt = smem;                      /* [HDMAX][BK+1] */
    float *Vt = Kt + HDMAX * (BK + 1);     /* [HDMAX][BK+1] */
    float *Qt = Vt + HDMAX * (BK + 1);     /* [HDMAX][BQ+1] raw q */
    float *dOt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BQ+1] */
    float *Ps = dOt + HDMAX * (BQ + 1);    /* [BQ][BK+1] */
    float *dSs = Ps + BQ * (BK + 1);       /* [BQ][BK+1] */
    float *lse2s = dSs + BQ * (BK + 1);    /* [BQ] */
    float *Ds = lse2s + BQ;                /* [BQ] */
    int *segq = (int *)(Ds + BQ);          /* [BQ] */

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int kt = blockIdx.x; /* early key tiles have the most queries: first */
    const int hk = blockIdx.y, b = blockIdx.z;
    const int hd = a.hd, k0 = kt * BK, kn = min(BK, a.seq - k0);
    const int nqt = (a.seq + BQ - 1) / BQ;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;

    attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
    attn_load_t<HDMAX, BK>(Vt, vb, a.kv_stride, k0, kn, hd, 1.0f);
    int segk[RK];
    float accK[RK][CD], accV[RK][CD];
#pragma unroll
    for (int r = 0; r < RK; r++) {
        segk[r] = attn_seg(a, b, k0 + ty * RK + r);
#pragma unroll
        for (int c = 0; c < CD; c++)
            accK[r][c] = accV[r][c] = 0.0f;
    }
    int2 kr = a.segment ? attn_tile_range(a, b, k0, kn) : make_int2(0, 0);

    for (int g = 0; g < a.group; g++) {
        const int h = hk * a.group + g;
        const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
        const float *dob = dout + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
        const size_t row_stat = ((size_t)b * a.n_heads + h) * a.seq;
        for (int qt = k0 / BQ; qt < nqt; qt++) {
            const int q0 = qt * BQ, qn = min(BQ, a.seq - q0);
            int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);
            /* attn_classify with the roles of the ranges as in the forward. */
            if (ft_mask_tile_before_window(q0, k0, kn, a.window))
                break; /* later query tiles are further past the window */
            bool full = (k0 + kn - 1 <= q0) && kn == BK && qn == BQ && a.window == 0;
            if (a.segment) {
                if (kr.y < qr.x || kr.x > qr.y)
                    continue;
                full = full && kr.x == kr.y && qr.x == qr.y && kr.x == qr.x;
            }
            __syncthreads(); /* previous Qt/dOt/Ps/dSs no longer read */
            attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, 1.0f);
            attn_load_t<HDMAX, BQ>(dOt, dob, a.q_stride, q0, qn, hd, 1.0f);
            if (threadIdx.x < BQ) {
                int i = q0 + threadIdx.x;
                lse2s[threadIdx.x] = i < a.seq ? attn_lse2(lse[row_stat + i]) : INFINITY;
                Ds[threadIdx.x] = i < a.seq ? Dv[row_stat + i] : 0.0f;
                segq[threadIdx.x] = attn_seg(a, b, i);
            }
            __syncthreads();

            /* S^T = K Q^T and dP^T = V dO^T for this thread's RK keys x CQ queries. */
            float s[RK][CQ], dp[RK][CQ];
            attn_two_products<RK, CQ, BK, BQ>(s, dp, Kt, Qt, Vt, dOt, hd, ty, tx);
#pragma unroll
            for (int r = 0; r < RK; r++)
#pragma unroll
                for (int c = 0; c < CQ; c++) {
                    int jl = ty * RK + r, j = k0 + jl, il = tx + 16 * c, i = q0 + il;
                    bool vis = full || (ft_mask_sees(i, j, a.window) && il < qn && jl < kn &&
                                        (!a.segment || segq[il] == segk[r]));
                    float p = vis ? exp2f(s[r][c] * a.scale_log2 - lse2s[il]) : 0.0f;
                    Ps[il * (BK + 1) + jl] = p;
                    dSs[il * (BK + 1) + jl] = p * (dp[r][c] - Ds[il]);
                }
            __syncthreads();

#pragma unroll 2
            for (int i = 0; i < qn; i++) {
                float pv[RK], sv[RK], ov[CD], qv[CD];
#pragma unroll
                for (int r = 0; r < RK; r++) {
                    pv[r] = Ps[i * (BK + 1) + ty * RK + r];
                    sv[r] = dSs[i * (BK + 1) + ty * RK + r];
                }
#pragma unroll
                for (int c = 0; c < CD; c++) {
                    ov[c] = dOt[(tx + 16 * c) * (BQ + 1) + i];
                    qv[c] = Qt[(tx + 16 * c) * (BQ + 1) + i];
                }
#pragma unroll
                for (int r = 0; r < RK; r++)
#pragma unroll
                    for (int c = 0; c < CD; c++) {
                        accV[r][c] = fmaf(pv[r], ov[c], accV[r][c]);
                        accK[r][c] = fmaf(sv[r], qv[c], accK[r][c]);
                    }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < RK; r++) {
        int j = k0 + ty * RK + r;
        if (j >= a.seq)
            continue;
        float *krow = dk + ((size_t)b * a.seq + j) * a.kv_stride + (size_t)hk * hd;
        float *vrow = dv + ((size_t)b * a.seq + j) * a.kv_stride + (size_t)hk * hd;
#pragma unroll
        for (int c = 0; c < CD; c++) {
            int d = tx + 16 * c;
            if (d < hd) {
                krow[d] = accK[r][c] * a.scale;
                vrow[d] = accV[r][c];
            }
        }
    }
}

/* ---------------------------------------------------------------- launchers */

static AttnArgs attn_args(ft_attn_shape s, const int32_t *segment, void *seg_scratch)
{
    AttnArgs a;
    a.batch = s.batch;
    a.seq = s.seq_len;
    a.n_heads = s.n_heads;
    a.n_kv = s.n_kv_heads;
    a.hd = s.head_dim;
    a.group = s.n_heads / s.n_kv_heads;
    a.q_stride = (size_t)s.n_heads * (size_t)s.head_dim;
    a.kv_stride = (size_t)s.n_kv_heads * (size_t)s.head_dim;
    a.scale = 1.0f / sqrtf((float)s.head_dim);
    a.scale_log2 = a.scale * ATT_LOG2E;
    a.segment = segment;
    a.ngran = (s.seq_len + ATT_GRAN - 1) / ATT_GRAN;
    a.seg_range = segment ? (const int2 *)seg_scratch : NULL;
    a.window = s.window > 0 ? s.window : 0;
    return a;
}

static bool attn_shape_ok(ft_attn_shape s)
{
    return s.batch >= 0 && s.seq_len >= 0 && s.n_heads > 0 && s.n_kv_heads > 0 &&
           s.n_heads % s.n_kv_heads == 0 && s.head_dim > 0 && s.head_dim <= 256 &&
           s.batch <= 65535 && s.n_heads <= 65535;
}

static size_t attn_seg_bytes(ft_attn_shape s)
{
    size_t ngran = ((size_t)s.seq_len + ATT_GRAN - 1) / ATT_GRAN;
    return ((size_t)s.batch * ngran * sizeof(int2) + 255) / 256 * 256;
}

static cudaError_t attn_seg_ranges(const AttnArgs &a, int2 *range, cudaStream_t st)
{
    size_t total = (size_t)a.batch * a.ngran;
    FT_LAUNCH(attn_seg_range_kernel, ft_cuda_grid_for(total, 256), 256, 0, st)(range, a.segment,
                                                                        a.batch, a.seq, a.ngran);
    return cudaGetLastError();
}

template <int HDMAX, int BQ, int BK>
static cudaError_t attn_fwd_run(float *out, float *lse, const float *q, const float *k,
                                const float *v, const AttnArgs &a, cudaStream_t st)
{
    typedef AttnFwdCfg<HDMAX, BQ, BK> C;
    void (*kern)(float *, float *, const float *, const float *, const float *, AttnArgs) =
        attn_fwd_kernel<HDMAX, BQ, BK>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem);
    if (e != cudaSuccess)
        return e;
    dim3 grid((unsigned)((a.seq + BQ - 1) / BQ), (unsigned)a.n_heads, (unsigned)a.batch);
    FT_LAUNCH(kern, grid, ATT_THREADS, C::smem, st)(out, lse, q, k, v, a);
    return cudaGetLastError();
}

template <int HDMAX, int BQ, int BK, int BK2, int BQ2>
static cudaError_t attn_bwd_run(float *dq, float *dk, float *dv, const float *dout,
                                const float *lse, const float *Dv, const float *q, const float *k,
                                const float *v, const AttnArgs &a, cudaStream_t st)
{
    typedef AttnDqCfg<HDMAX, BQ, BK> Cq;
    typedef AttnDkvCfg<HDMAX, BK2, BQ2> Ckv;
    void (*kq)(float *, const float *, const float *, const float *, const float *,
               const float *, const float *, AttnArgs) = attn_bwd_dq_kernel<HDMAX, BQ, BK>;
    void (*kkv)(float *, float *, const float *, const float *, const float *, const float *,
                const float *, const float *, AttnArgs) = attn_bwd_dkv_kernel<HDMAX, BK2, BQ2>;
    cudaError_t e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)Cq::smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)Ckv::smem);
    if (e != cudaSuccess)
        return e;
    dim3 gkv((unsigned)((a.seq + BK2 - 1) / BK2), (unsigned)a.n_kv, (unsigned)a.batch);
    FT_LAUNCH(kkv, gkv, ATT_THREADS, Ckv::smem, st)(dk, dv, dout, lse, Dv, q, k, v, a);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    dim3 gq((unsigned)((a.seq + BQ - 1) / BQ), (unsigned)a.n_heads, (unsigned)a.batch);
    FT_LAUNCH(kq, gq, ATT_THREADS, Cq::smem, st)(dq, dout, lse, Dv, q, k, v, a);
    return cudaGetLastError();
}

extern "C" size_t ft_cuda_attention_fwd_scratch_bytes(ft_attn_shape s)
{
    return attn_seg_bytes(s);
}

extern "C" cudaError_t ft_cuda_launch_attention_fwd(float *out, float *lse, const float *q,
                                                    const float *k, const float *v,
                                                    const int32_t *segment, ft_attn_shape s,
                                                    void *scratch, cudaStream_t st)
{
    if (!attn_shape_ok(s))
        return cudaErrorInvalidValue;
    if (s.batch == 0 || s.seq_len == 0)
        return cudaSuccess;
    AttnArgs a = attn_args(s, segment, scratch);
    if (segment) {
        cudaError_t e = attn_seg_ranges(a, (int2 *)scratch, st);
        if (e != cudaSuccess)
            return e;
    }
    /* Shared memory: 66 KB, 75 KB, 70 KB. */
    if (s.head_dim <= 64)
        return attn_fwd_run<64, 64, 64>(out, lse, q, k, v, a, st);
    if (s.head_dim <= 128)
        return attn_fwd_run<128, 64, 32>(out, lse, q, k, v, a, st);
    return attn_fwd_run<256, 32, 16>(out, lse, q, k, v, a, st);
}

extern "C" size_t ft_cuda_attention_bwd_scratch_bytes(ft_attn_shape s)
{
    size_t dbytes = (size_t)s.batch * s.n_heads * s.seq_len * sizeof(float);
    return attn_seg_bytes(s) + (dbytes + 255) / 256 * 256;
}

extern "C" cudaError_t ft_cuda_launch_attention_bwd(float *dq, float *dk, float *dv,
                                                    const float *dout, const float *out,
                                                    const float *lse, const float *q,
                                                    const float *k, const float *v,
                                                    const int32_t *segment, ft_attn_shape s,
                                                    void *scratch, cudaStream_t st)
{
    if (!attn_shape_ok(s))
        return cudaErrorInvalidValue;
    if (s.batch == 0 || s.seq_len == 0)
        return cudaSuccess;
    AttnArgs a = attn_args(s, segment, scratch);
    float *Dv = (float *)((char *)scratch + attn_seg_bytes(s));
    cudaError_t e;
    if (segment) {
        e = attn_seg_ranges(a, (int2 *)scratch, st);
        if (e != cudaSuccess)
            return e;
    }
    size_t rows = (size_t)s.batch * s.seq_len * s.n_heads;
    FT_LAUNCH(attn_bwd_dot_kernel, ft_cuda_grid_for(rows * FT_WARP, 256), 256, 0, st)
    (Dv, dout, out, a);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    /* Shared memory (dQ, dK/dV): 83/100 KB, 109/117 KB, 105/107 KB. */
    if (s.head_dim <= 64)
        return attn_bwd_run<64, 64, 64, 64, 64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
    if (s.head_dim <= 128)
        return attn_bwd_run<128, 64, 32, 64, 32>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
    return attn_bwd_run<256, 32, 16, 32, 16>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
}
