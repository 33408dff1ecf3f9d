/* Flash attention in fp32 on CUDA cores (cuda_attention.cu: the forward, cuda_attention_bwd.cu:
 * the backward; this header: what both share): causal, document-masked, grouped-query,
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
#ifndef FT_CUDA_ATTENTION_CUH
#define FT_CUDA_ATTENTION_CUH

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

/* ---------------------------------------------------------------- shared helpers */

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

/* ---------------------------------------------------------------- host side */

static inline AttnArgs attn_args(ft_attn_shape s, const int32_t *segment, void *seg_scratch)
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

static inline bool attn_shape_ok(ft_attn_shape s)
{
    return s.batch >= 0 && s.seq_len >= 0 && s.n_heads > 0 && s.n_kv_heads > 0 &&
           s.n_heads % s.n_kv_heads == 0 && s.head_dim > 0 && s.head_dim <= 256 &&
           s.batch <= 65535 && s.n_heads <= 65535;
}

static inline size_t attn_seg_bytes(ft_attn_shape s)
{
    size_t ngran = ((size_t)s.seq_len + ATT_GRAN - 1) / ATT_GRAN;
    return ((size_t)s.batch * ngran * sizeof(int2) + 255) / 256 * 256;
}

/* Fills range (attn_seg_bytes of scratch) with every granule's [min, max] segment id
 * (cuda_attention.cu); both directions call it before their kernels. */
cudaError_t attn_seg_ranges(const AttnArgs &a, int2 *range, cudaStream_t st);

#endif
