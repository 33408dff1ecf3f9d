/* Shared pieces of the tensor-core attention kernels (cuda_attention_tc.cu: forward,
 * cuda_attention_tc_bwd.cu: backward): the arguments, the tile geometry, cp.async staging
 * of a head's rows, bf16 packing, the visibility rule and the tile-skipping tests. */
#ifndef FT_CUDA_ATTENTION_TC_CUH
#define FT_CUDA_ATTENTION_TC_CUH

#include "cuda_common.cuh"
#include "cuda_mma.cuh"

#include "backend/attention_mask.h"

#include <limits.h>

#define TC_WARPS 4
#define TC_THREADS (TC_WARPS * 32)
#define TC_BQ 64
#define TC_PAD 8
#define TC_LOG2E 1.4426950408889634f
#define TC_LN2 0.6931471805599453f
#define TC_GRAN 32 /* tokens per granule of the segment-range table; every tile starts on one */

struct TcArgs {
    int seq, hd, group;
    size_t q_stride, kv_stride; /* elements per token */
    float scale_log2;
    int window;               /* 0: none; else query i sees only keys j > i - window */
    const int32_t *segment;   /* [batch * seq] or NULL */
    const int2 *seg_range;    /* [batch][ngran] [min, max] id per granule (with segment) */
    int ngran;
};

/* Forward tile geometry: each warp owns MT m-tiles of 16 query rows (so each K and V
 * fragment read from shared memory feeds MT products), the block BQ = 64 MT queries; the
 * Q tile and two K and two V buffers of BK rows. Q's A fragments stay in registers where
 * they fit beside O (MT x HDMAX/2 fp32) and S (MT x BK/2): up to MT x HDMAX = 128 with
 * 64-key tiles;
 * elsewhere each k-step reloads them from the Q tile, which stays in shared memory for
 * the whole pass. */
template <int HDMAX, int BK, int MT>
struct TcFwdCfg {
    static constexpr int BQ = 16 * TC_WARPS * MT;
    static constexpr int PITCH = HDMAX + TC_PAD; /* bf16 per smem row */
    static constexpr bool Q_IN_REGS = MT * HDMAX <= 128 && BK <= 64;
    /* S = Q K^T loads each k-step's fragments (MT x 4 + BK / 2 registers) one k-step ahead
     * where the live registers allow two sets: O (MT x HDMAX/2), S (MT x BK/2) and held Q
     * fragments. ptxas (CUDA 13, sm_90) fits up to about 224 (64 x 64, 128 x 32 and
     * 128 x 64 with one m-tile, 256 x 32: no spill) and spills above it (128 x 64 with
     * two m-tiles, 240: 76 bytes in the loop; 64 x 128: 144), where one set stays. */
    static constexpr int LIVE_REGS = MT * HDMAX / 2 + MT * BK / 2 +
                                     (Q_IN_REGS ? MT * HDMAX / 4 : 0) + 2 * (MT * 4 + BK / 2);
    static constexpr bool K_AHEAD = LIVE_REGS <= 224;
    static constexpr size_t smem = (size_t)(BQ + 4 * BK) * PITCH * sizeof(uint16_t);
};

/* Stages rows t0 .. t0+n-1 of one head (hd bf16 each) into dst[row][PITCH] with cp.async,
 * by the block's THREADS threads; rows >= n and features >= hd are zero-filled. */
template <int HDMAX, int ROWS, int THREADS = TC_THREADS>
__device__ __forceinline__ void tc_stage(uint16_t *dst, const uint16_t *base, size_t stride,
                                         int t0, int n, int hd)
{
    constexpr int CHUNKS = HDMAX / 8; /* 16-byte chunks per row */
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += THREADS) {
        int r = idx / CHUNKS, c = idx % CHUNKS;
        int d0 = c * 8;
        bool valid = r < n && d0 < hd;
        const uint16_t *src = valid ? base + (size_t)(t0 + r) * stride + d0 : base;
        ft_cp_async_16(dst + r * (HDMAX + TC_PAD) + d0, src, valid ? 16 : 0);
    }
}

/* Shared-memory offsets (elements, rows of `pitch`) of this lane's ldmatrix.x4 row:
 * - tc_a_frag_row: the A fragment of the 16 x 16 tile at rows row0.., column 0 (add the
 *   k-step's column): lane l points at row l % 16, column 8 (l / 16);
 * - tc_bt_pair_row: the B fragments of two 8-column groups from a row-major B^T tile
 *   (rows n0 .. n0+15 are the columns of B; plain ldmatrix): matrices (group 0, k 0-7),
 *   (group 0, k 8-15), (group 1, k 0-7), (group 1, k 8-15), so r[0..1] and r[2..3] are
 *   the two groups' fragments;
 * - tc_b_pair_row: the B fragments of feature groups c0/8 and c0/8 + 1 from a row-major
 *   K x N tile at rows k0 .. k0+15 (ldmatrix.trans): matrices (keys 0-7, group 0), (keys
 *   8-15, group 0), (keys 0-7, group 1), (keys 8-15, group 1). */
__device__ __forceinline__ int tc_a_frag_row(int row0, int lane, int pitch)
{
    return (row0 + lane % 16) * pitch + 8 * (lane / 16);
}

__device__ __forceinline__ int tc_bt_pair_row(int n0, int lane, int pitch)
{
    return (n0 + 8 * (lane / 16) + lane % 8) * pitch + 8 * ((lane / 8) % 2);
}

__device__ __forceinline__ int tc_b_pair_row(int k0, int c0, int lane, int pitch)
{
    return (k0 + lane % 16) * pitch + c0 + 8 * (lane / 16);
}

/* c0 += A B0 and c1 += A B1: one A fragment against the two 8-column groups whose B
 * fragments one ldmatrix.x4 of tc_bt_pair_row or tc_b_pair_row loaded (b[0..1], b[2..3]). */
__device__ __forceinline__ void tc_mma_pair(float c0[4], float c1[4], const uint32_t a[4],
                                            const uint32_t b[4])
{
    ft_mma_m16n8k16_bf16(c0, a, b, c0);
    ft_mma_m16n8k16_bf16(c1, a, b + 2, c1);
}

/* 2^x by the special-function unit (one MUFU.EX2, denormal results flushed to zero:
 * probabilities under 2^-126 of the row's maximum are zero either way); the harness uses
 * libm's. ex2(-inf) = +0 and ex2(0) = 1, which the masked and first-tile paths rely on. */
__device__ __forceinline__ float tc_exp2(float x)
{
#ifdef FT_CUDA_EMULATION
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* Stages key tile kt (BK keys, clipped at the sequence's end) of one head's K and V rows
 * (kb, vb) into Kd and Vd. */
template <int HDMAX, int BK, int THREADS = TC_THREADS>
__device__ __forceinline__ void tc_stage_kv(uint16_t *Kd, uint16_t *Vd, const uint16_t *kb,
                                            const uint16_t *vb, const TcArgs &a, int kt)
{
    const int k0 = kt * BK, kn = min(BK, a.seq - k0);
    tc_stage<HDMAX, BK, THREADS>(Kd, kb, a.kv_stride, k0, kn, a.hd);
    tc_stage<HDMAX, BK, THREADS>(Vd, vb, a.kv_stride, k0, kn, a.hd);
}

/* Two fp32 as the bf16 pair of one mma operand register (lo in the lower half), each
 * rounded to nearest even: one cvt.rn.bf16x2.f32, where ft_bf16_from_f32's integer
 * rounding costs about 7 instructions an element. The probabilities and dS of every tile
 * pass through here (64 to 128 values a thread per tile against 256 products a warp), so
 * the integer sequence was a large part of the kernels' non-matrix instructions. */
__device__ __forceinline__ uint32_t tc_pack_bf16(float lo, float hi)
{
    return ft_cvt_rn_bf16x2(hi, lo);
}

static inline int tc_ngran(ft_attn_shape s) { return (s.seq_len + TC_GRAN - 1) / TC_GRAN; }

/* Bytes of the segment-range table, the scratch both passes start with. */
static inline size_t tc_seg_range_bytes(ft_attn_shape s)
{
    return (size_t)s.batch * tc_ngran(s) * sizeof(int2);
}

/* Whether the current device gives a block `smem` bytes of dynamic shared memory (its
 * opt-in limit); false where the query fails. */
static inline bool tc_device_smem_takes(size_t smem)
{
    int dev = 0, optin = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ==
               cudaSuccess &&
           smem <= (size_t)optin;
}

/* Fills a.seg_range (a.segment non-NULL) before the kernels that read it (cuda_attention_tc.cu). */
cudaError_t tc_seg_ranges(const TcArgs &a, int batch, cudaStream_t st);

/* The forward on Hopper's warpgroup MMA (cuda_attention_wgmma.cu), for the shapes
 * ft_cuda_attention_tc_fwd_wgmma (cuda_internal.h) accepts. */
cudaError_t tc_fwd_wgmma(float *out, float *lse, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st);
cudaError_t tc_fwd_wgmma(ft_bf16 *out, float *lse, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st);

/* seg_range: scratch of tc_seg_range_bytes, used only with segment ids */
static inline TcArgs tc_args(ft_attn_shape s, const int32_t *segment, void *seg_range)
{
    TcArgs a;
    a.seq = s.seq_len;
    a.hd = s.head_dim;
    a.group = s.n_heads / s.n_kv_heads;
    a.q_stride = (size_t)s.n_heads * s.head_dim;
    a.kv_stride = (size_t)s.n_kv_heads * s.head_dim;
    a.scale_log2 = TC_LOG2E / sqrtf((float)s.head_dim);
    a.window = s.window > 0 ? s.window : 0;
    a.segment = segment;
    a.seg_range = (const int2 *)seg_range;
    a.ngran = tc_ngran(s);
    return a;
}

/* Query `row` sees key `col` (absolute positions in the batch row b): causal, inside the
 * sliding window, same document. */
__device__ __forceinline__ bool tc_visible(const TcArgs &a, int b, int row, int col, int row_seg)
{
    bool vis = ft_mask_sees(row, col, a.window) && col < a.seq && row < a.seq;
    if (vis && a.segment)
        vis = a.segment[(size_t)b * a.seq + col] == row_seg;
    return vis;
}

__device__ __forceinline__ int tc_segment(const TcArgs &a, int b, int t)
{
    return a.segment && t < a.seq ? a.segment[(size_t)b * a.seq + t] : 0;
}

/* Tile skipping. A pair of a query tile [q0, q0+qn) and a key tile [k0, k0+kn) is
 * computed only if some query of it may see some key; the causal bound (no key tile past
 * the query tile's last row) is each kernel's loop bound, the other two rules are here.
 * Skipping changes no bit of the result: a wholly masked tile adds exact zeros (p = 0; the
 * forward's running max, and so its rescale factor 1, are unchanged).
 *
 * Window: every key of the tile is at or before q0 - window, the lower edge of the first
 * (furthest-reaching) query's window. Key tiles before tc_first_key_tile are all such, and
 * so are all query tiles after the first one that is (the dK/dV pass stops there): a
 * window costs O(T x window). */
__device__ __forceinline__ bool tc_before_window(const TcArgs &a, int q0, int k0, int kn)
{
    return ft_mask_tile_before_window(q0, k0, kn, a.window);
}

/* The first key tile (of bk keys) that can hold a key inside query q0's window: the one
 * holding key q0 - window + 1. */
__device__ __forceinline__ int tc_first_key_tile(const TcArgs &a, int q0, int bk)
{
    return ft_mask_first_key_tile(q0, a.window, bk);
}

/* Documents: the [min, max] segment id over tokens t0 .. t0+n-1 of row b (n >= 1), from
 * the granules covering them (a pre-pass, tc_seg_ranges, reduces each granule of TC_GRAN
 * ids once per call). No order of the ids is assumed (packed rows have non-decreasing
 * ids, but the op allows any), so a walk over key tiles tests each one; the test is one
 * or two broadcast loads, where reducing the tile's own ids would read all T ids per
 * query tile. Tiles start on granules, so the range is the tile's own. */
__device__ __forceinline__ int2 tc_segment_range(const TcArgs &a, int b, int t0, int n)
{
    if (!a.segment)
        return make_int2(0, 0);
    const int2 *r = a.seg_range + (size_t)b * a.ngran;
    int g0 = t0 / TC_GRAN, g1 = (t0 + n - 1) / TC_GRAN;
    int2 out = r[g0];
    for (int g = g0 + 1; g <= g1; g++)
        out = make_int2(min(out.x, r[g].x), max(out.y, r[g].y));
    return out;
}

/* False when the tile [t0, t0+n) shares no segment id range with `other` (the other
 * tile's range): no document of one can meet a document of the other. With packed rows
 * (non-decreasing ids) the surviving pairs are exactly those with a visible pair. */
__device__ __forceinline__ bool tc_segments_meet(const TcArgs &a, int b, int2 other, int t0, int n)
{
    if (!a.segment)
        return true;
    int2 r = tc_segment_range(a, b, t0, n);
    return r.x <= other.y && other.x <= r.y;
}

/* The first key tile after `after` and before `end` whose documents may meet the query
 * tile's (range qr); `end` when none. Block-uniform. */
template <int BK>
__device__ __forceinline__ int tc_next_key_tile(const TcArgs &a, int b, int2 qr, int after,
                                                int end)
{
    int kt = after + 1;
    while (kt < end && !tc_segments_meet(a, b, qr, kt * BK, min(BK, a.seq - kt * BK)))
        kt++;
    return kt;
}

/* Where a query-tile block (the forwards, the dQ passes) works: query tile [q0, q0 + qn)
 * of BQ rows (the grid's x in reverse: the longest rows first), head h of batch row b and
 * its KV head, the head's first element in the query-shaped tensors (q, dO, O, dQ) and in
 * k and v, and its key tiles of BK keys: kt the first it visits (in the window, meeting
 * its documents, range qr), nkt the one past the tile holding its last query. */
struct TcQueryBlock {
    int h, b, q0, qn, kt, nkt;
    int2 qr;
    size_t q_off, kv_off;
};

template <int BQ, int BK>
__device__ __forceinline__ TcQueryBlock tc_query_block(const TcArgs &a)
{
    TcQueryBlock w;
    const int nqt = (a.seq + BQ - 1) / BQ, qt = nqt - 1 - (int)blockIdx.x;
    w.h = blockIdx.y;
    w.b = blockIdx.z;
    w.q0 = qt * BQ;
    w.qn = min(BQ, a.seq - w.q0);
    w.q_off = (size_t)w.b * a.seq * a.q_stride + (size_t)w.h * a.hd;
    w.kv_off = (size_t)w.b * a.seq * a.kv_stride + (size_t)(w.h / a.group) * a.hd;
    w.nkt = (w.q0 + w.qn - 1) / BK + 1;
    w.qr = tc_segment_range(a, w.b, w.q0, w.qn);
    w.kt = tc_next_key_tile<BK>(a, w.b, w.qr, tc_first_key_tile(a, w.q0, BK) - 1, w.nkt);
    return w;
}

/* The dK/dV passes' walk over (query head of the GQA group gi, query tile qt of BQ
 * queries) pairs for the block of keys [k0, k0 + kn) with segment range kr: the next pair
 * after (gi, qt), per head the query tiles from the one holding k0 (queries before it see
 * none of the keys) up to the first past the window, those meeting the keys' documents.
 * False when none is left. Start from gi = 0, qt = k0 / BQ - 1. Block-uniform. */
template <int BQ>
__device__ __forceinline__ bool tc_next_query_pair(const TcArgs &a, int b, int2 kr, int k0, int kn,
                                                   int &gi, int &qt)
{
    const int nqt = (a.seq + BQ - 1) / BQ;
    for (qt++; gi < a.group;) {
        const int q0 = qt * BQ;
        if (qt >= nqt || tc_before_window(a, q0, k0, kn)) { /* later tiles: further out */
            gi++;
            qt = k0 / BQ;
        } else if (tc_segments_meet(a, b, kr, q0, min(BQ, a.seq - q0))) {
            return true;
        } else {
            qt++;
        }
    }
    return false;
}

/* The exact [min, max] segment id of a warp's own tokens t0 .. t0+n-1 (n <= 0: none,
 * (0, 0)), reduced across the warp's lanes; every lane of the warp must call it. A warp's
 * 16 or 32 rows need not fill a granule, so the granule table would give a superset. */
__device__ __forceinline__ int2 tc_warp_segment_range(const TcArgs &a, int b, int t0, int n)
{
    if (!a.segment || n <= 0)
        return make_int2(0, 0);
    int lo = INT_MAX, hi = INT_MIN;
    for (int i = threadIdx.x % 32; i < n; i += 32) {
        int id = a.segment[(size_t)b * a.seq + t0 + i];
        lo = min(lo, id);
        hi = max(hi, id);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        lo = min(lo, __shfl_xor_sync(FT_FULL_MASK, lo, off));
        hi = max(hi, __shfl_xor_sync(FT_FULL_MASK, hi, off));
    }
    return make_int2(lo, hi);
}

/* How a warp computes its part of a tile pair: the queries [q0, q0+qn) against the keys
 * [k0, k0+kn), footprints in registers (rows past the end are zero-filled), with segment
 * ranges qr and kr of their tokens inside the sequence.
 *   TC_SKIP    no query sees any key (all keys after all queries, before the first
 *              query's window, or in other documents): it would add exact zeros;
 *   TC_BARE    every pair of the footprint is inside the sequence and visible: the
 *              softmax needs no per-element test;
 *   TC_MASKED  the rest (the diagonal, the window's edge, a document boundary, the end
 *              of the sequence): the visibility rule per element.
 * By position TC_SKIP is exact (a visible pair exists otherwise); with documents it is
 * exact for packed (non-decreasing) ids, conservative otherwise. */
enum { TC_SKIP, TC_BARE, TC_MASKED };

__device__ __forceinline__ int tc_pair_class(const TcArgs &a, int q0, int qn, int2 qr, int k0,
                                             int kn, int2 kr)
{
    const int qv = min(qn, a.seq - q0), kv = min(kn, a.seq - k0); /* inside the sequence */
    if (qv <= 0 || kv <= 0 || k0 > q0 + qv - 1 || tc_before_window(a, q0, k0, kv) ||
        (a.segment && (kr.x > qr.y || qr.x > kr.y)))
        return TC_SKIP;
    const bool bare = qv == qn && kv == kn && ft_mask_tile_all_seen(q0, qn, k0, kn, a.window) &&
                      (!a.segment || (qr.x == qr.y && kr.x == kr.y && qr.x == kr.x));
    return bare ? TC_BARE : TC_MASKED;
}

/* The forward's per-tile softmax, on one m-tile of S in the m16n8 accumulator layout
 * (mma.sync's and wgmma's alike): this lane holds rows row0 + g and row0 + g + 8 (g =
 * lane / 4) and columns 2t, 2t + 1 (t = lane % 4) of each of the NT 8-key groups from k0.
 *
 * tc_mask_rows: the visibility rule per element, on the tiles that need it (the row's
 * document id read here, not held: registers are what limits these kernels). */
template <int NT>
__device__ __forceinline__ void tc_mask_rows(float s[NT][4], const TcArgs &a, int b, int row0,
                                             int k0)
{
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int row = row0 + g + 8 * (e >> 1);
            int col = k0 + n * 8 + 2 * t + (e & 1);
            if (!tc_visible(a, b, row, col, tc_segment(a, b, row)))
                s[n][e] = -INFINITY;
        }
}

/* Online softmax in base 2 on S's registers, the scale folded into the exponent's FMA:
 * p = 2^(s c - m'), c = log2(e) / sqrt(hd), m' the running maximum of s c (mx, per row);
 * row maxima and sums over the four lanes of a quad (shuffles xor 1, 2). With PACK, P is
 * rounded to bf16 pairs at once (pk: rows g and g + 8 of each key group, the A operand of
 * P V), so the fp32 scores die here; without, P stays in s (fp32) for tc_pack_p, and pk is
 * not touched. l takes the row sums, alpha = 2^(m - m') the factor O is to be rescaled
 * by. Returns whether some row's rescale would change its O: alpha = 1 exactly, or a row
 * that has seen nothing yet (m = -inf, O still +0), changes nothing. */
template <int NT, bool PACK = true>
__device__ __forceinline__ bool tc_online_softmax(float s[NT][4], uint32_t pk[NT][2], float mx[2],
                                                  float l[2], float alpha[2], float scale_log2)
{
    bool moved = false;
    float rmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            rmax[e >> 1] = fmaxf(rmax[e >> 1], s[n][e]);
    float ref[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(FT_FULL_MASK, rmax[r], 1));
        rmax[r] = fmaxf(rmax[r], __shfl_xor_sync(FT_FULL_MASK, rmax[r], 2));
        const float mn = fmaxf(mx[r], rmax[r] * scale_log2);
        /* a row that has seen nothing keeps m = -inf: reference 0 avoids inf - inf */
        ref[r] = mn == -INFINITY ? 0.0f : mn;
        alpha[r] = tc_exp2(mx[r] - ref[r]);
        moved |= alpha[r] != 1.0f && mn != -INFINITY;
        mx[r] = mn;
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; n++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[n][e] = tc_exp2(fmaf(s[n][e], scale_log2, -ref[e >> 1]));
            sum[e >> 1] += s[n][e];
        }
        if constexpr (PACK) {
            pk[n][0] = tc_pack_bf16(s[n][0], s[n][1]);
            pk[n][1] = tc_pack_bf16(s[n][2], s[n][3]);
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        sum[r] += __shfl_xor_sync(FT_FULL_MASK, sum[r], 1);
        sum[r] += __shfl_xor_sync(FT_FULL_MASK, sum[r], 2);
        l[r] = l[r] * alpha[r] + sum[r];
    }
    return moved;
}

/* O *= alpha (tc_online_softmax's factors), row by row: o[d][0..1] are row g's, o[d][2..3]
 * row g + 8's. */
template <int DT>
__device__ __forceinline__ void tc_rescale_o(float o[DT][4], const float alpha[2])
{
#pragma unroll
    for (int d = 0; d < DT; d++) {
        o[d][0] *= alpha[0];
        o[d][1] *= alpha[0];
        o[d][2] *= alpha[1];
        o[d][3] *= alpha[1];
    }
}

/* P (fp32, left in s by tc_online_softmax without PACK) to bf16 pairs. */
template <int NT>
__device__ __forceinline__ void tc_pack_p(const float s[NT][4], uint32_t pk[NT][2])
{
#pragma unroll
    for (int n = 0; n < NT; n++) {
        pk[n][0] = tc_pack_bf16(s[n][0], s[n][1]);
        pk[n][1] = tc_pack_bf16(s[n][2], s[n][3]);
    }
}

/* The softmax's backward for one score of a tile: p = 2^(s c - lse) (lse in base 2, as
 * the forward's scale folded into the exponent), and dS = p (dP - D), D the query row's
 * sum of dO * O. On a tile that needs the mask (masked), p = 0 where hidden() says the
 * pair is not visible; it is asked there only, after the exponent. Returns p; ds
 * receives dS. */
template <typename Hidden>
__device__ __forceinline__ float tc_softmax_grad(float s, float dp, float lse2, float D,
                                                 float scale_log2, bool masked, Hidden hidden,
                                                 float &ds)
{
    float p = tc_exp2(fmaf(s, scale_log2, -lse2));
    if (masked && hidden())
        p = 0.0f;
    ds = p * (dp - D);
    return p;
}

/* The forward's epilogue for one m-tile (rows row0 + g, row0 + g + 8; DT 8-feature groups
 * of O in the accumulator layout): o / l into ob (a head's rows, q_stride apart), and
 * lse = ln 2 (m + log2 l) into lb; rows that saw nothing give 0 and -inf. */
template <int DT, typename OT>
__device__ __forceinline__ void tc_store_out_rows(OT *ob, float *lb, const float o[DT][4],
                                                  const float mx[2], const float l[2], int row0,
                                                  const TcArgs &a)
{
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + g + 8 * r;
        if (row >= a.seq)
            continue;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
        for (int d = 0; d < DT; d++) {
            int c = d * 8 + 2 * t;
            if (c < a.hd) {
                ft_st(ob, (size_t)row * a.q_stride + c, o[d][2 * r] * inv);
                ft_st(ob, (size_t)row * a.q_stride + c + 1, o[d][2 * r + 1] * inv);
            }
        }
        if (t == 0)
            lb[row] = l[r] > 0.0f ? TC_LN2 * (mx[r] + log2f(l[r])) : -INFINITY;
    }
}

/* Harness only: the tile pairs each kernel computed (0 forward, 1 dK/dV, 2 dQ), per warp
 * too, and the forward's skipped rescales (cuda_internal.h), so that test_attention_tc
 * can check that exactly the needed pairs ran, that exactly the ones that need it
 * evaluated the mask, and which tiles skipped the rescale. Thread 0 of a block counts;
 * blocks may run on several host threads, hence the atomic. */
#ifdef FT_CUDA_EMULATION
#define TC_COUNT_TILE(kind)                                                                        \
    do {                                                                                           \
        if (threadIdx.x == 0)                                                                      \
            __atomic_fetch_add(&ft_cuda_attention_tc_tiles[kind], 1ull, __ATOMIC_RELAXED);         \
    } while (0)
/* Lane 0 of a warp counts a tile it computes (counter kind) and, if `masked`, one on which
 * it evaluates the mask per element (kind + 1). */
#define TC_COUNT_WARP_TILE(kind, masked)                                                           \
    do {                                                                                           \
        if (threadIdx.x % 32 == 0) {                                                               \
            __atomic_fetch_add(&ft_cuda_attention_tc_tiles[kind], 1ull, __ATOMIC_RELAXED);         \
            if (masked)                                                                            \
                __atomic_fetch_add(&ft_cuda_attention_tc_tiles[(kind) + 1], 1ull,                  \
                                   __ATOMIC_RELAXED);                                              \
        }                                                                                          \
    } while (0)
/* Lane 0 of a warp counts one event of counter kind (the forward's skipped rescales). */
#define TC_COUNT_WARP(kind)                                                                        \
    do {                                                                                           \
        if (threadIdx.x % 32 == 0)                                                                 \
            __atomic_fetch_add(&ft_cuda_attention_tc_tiles[kind], 1ull, __ATOMIC_RELAXED);         \
    } while (0)
#else
#define TC_COUNT_TILE(kind) ((void)0)
#define TC_COUNT_WARP_TILE(kind, masked) ((void)0)
#define TC_COUNT_WARP(kind) ((void)0)
#endif

#endif
