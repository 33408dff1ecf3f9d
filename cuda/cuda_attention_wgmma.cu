/* Flash attention forward on Hopper's warpgroup MMA (wgmma, sm_90a): the tensor-core
 * forward of cuda_attention_tc.cu (same arguments, masks, tile skipping, online softmax
 * and outputs) with its two products issued per warpgroup from shared memory instead of
 * per warp from ldmatrix fragments.
 *
 * Why. An mma.sync kernel feeds the tensor cores through registers: every K and V
 * fragment is read from shared memory by ldmatrix into each warp's registers, and on an
 * H100 that traffic and the issue slots it takes hold such kernels near FlashAttention-2's
 * level (about a third of the dense bf16 peak in doc/benchmarks.md's measurements, where
 * cuDNN's Hopper kernels reach 55-60 %); the register budget (O, S and fragments) is what
 * limits their tiles. wgmma reads its B operand (K for S = Q K^T, V for O += P V)
 * and here also Q straight from shared memory, 64 x N x 16 per instruction, asynchronously:
 * no fragment registers, no ldmatrix, larger tiles.
 *
 * Work split. One block of two warpgroups (8 warps) per 128-query tile, head and batch
 * row; warpgroup w owns queries 64w .. 64w+63 of the tile for the whole pass (its O and
 * softmax statistics in registers, as the mma.sync kernel's warps do). Key tiles of 128
 * from the first inside the window up to the diagonal, skipping those whose documents
 * cannot meet the query tile's; staged by cp.async into 128-byte-swizzled tiles (rows of
 * 64 features, cuda_wgmma.cuh), the next tile in flight while the current one is used.
 * Per tile, per warpgroup:
 *   S = Q K^T   head_dim / 16 wgmma m64n128k16, Q (K-major: its rows of features) and K
 *               (K-major as B: a key's row of features is B's column) from shared memory;
 *               S's 64 x 128 fp32 accumulator is 64 registers a thread, in m16n8 layout;
 *   mask where needed, online softmax (cuda_attention_tc.cuh's helpers, the mma.sync
 *               forward's code), O's rescale where some row's maximum moved, P to bf16;
 *   O += P V    8 wgmma m64n{64,128}k16, A = P from registers (two 8-key accumulator
 *               groups are exactly the A fragment of 16 keys), V from shared memory
 *               MN-major (a key's row of features is B's row: trans-b).
 * Within a warpgroup the products of consecutive tiles overlap the softmax, as in
 * FlashAttention-3: tile j's S = Q K^T and tile j-1's O += P V are issued together; the
 * softmax of tile j runs as soon as S has landed, while the tensor cores still work on
 * P V; then O, its product complete, is rescaled and tile j's P packed for the next
 * round. A tile's V is thus read during the next tile's softmax while the tile after is
 * loaded: three V buffers. Every visited tile issues both products, even one the
 * warpgroup skips (its S ignored, its P zero), so that no wgmma sits on a divergent path
 * (ptxas would serialise every wgmma, warning C7520). The two warpgroups of a block also
 * overlap each other's softmax with their products (no explicit ping-pong yet).
 *
 * Shared memory: the 1024-byte-aligned Q tile (128 rows), two K and three V tiles (128
 * rows), each head_dim / 64 blocks of [rows][64 features] (128 bytes a row, the swizzle's
 * width): 97 KiB at head_dim 64, 193 KiB at 128 (an H100 takes 227). ptxas (CUDA 13):
 * 227 registers at head_dim 128, 194 at 64, no spill, every product one chain.
 *
 * At head_dim 256 (GPT-J, whose attention cuDNN does not take) the key tiles hold 64 keys
 * (S 32 registers, O 128) and the block 225 KiB.
 *
 * Requirements: head_dim a multiple of 8 and at most 256; an sm_90 device and a build with
 * sm_90a code (ft_cuda_attention_tc_fwd_wgmma). */
#include "cuda_attention_wgmma.cuh"

#include <stdlib.h>
#include <string.h>

template <int HDMAX>
struct WgFwdCfg {
    /* 64-key tiles at head_dim 256: O takes 128 registers a thread there, and the five
     * K and V tiles must fit beside Q in an H100's 227 KiB */
    static constexpr int BQ = 128, BK = HDMAX > 128 ? 64 : 128;
    static constexpr int Q_BYTES = BQ * HDMAX * 2, KV_BYTES = BK * HDMAX * 2;
    /* Q, two K buffers, three V buffers (a tile's V is read by its P V during the next
     * tile's softmax, while the tile after that is being loaded); + alignment */
    static constexpr size_t smem = 1024 + Q_BYTES + 5 * (size_t)KV_BYTES;
};

template <int HDMAX, typename OT>
__global__ void __launch_bounds__(WG_THREADS, 1)
    attn_fwd_wgmma_kernel(OT *__restrict__ out, float *__restrict__ lse,
                          const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                          const uint16_t *__restrict__ v, TcArgs a)
{
#if FT_WGMMA_CODE
    typedef WgFwdCfg<HDMAX> C;
    constexpr int BQ = C::BQ, BK = C::BK, KS = HDMAX / 16, NT = BK / 8, DT = HDMAX / 8;
    FT_DYNAMIC_SMEM(uint8_t, raw);
    uint32_t q_addr;
    uint8_t *Qs = wg_smem_aligned(raw, &q_addr), *Ks = Qs + C::Q_BYTES, *Vs = Ks + 2 * C::KV_BYTES;
    /* Ks: [2][BK rows], Vs: [3][BK rows] */
    const uint32_t k_addr = q_addr + C::Q_BYTES, v_addr = k_addr + 2 * C::KV_BYTES;

    const int warp = threadIdx.x / 32, wg = warp / 4;
    const TcQueryBlock blk = tc_query_block<BQ, BK>(a);
    const int h = blk.h, b = blk.b, q0 = blk.q0, qn = blk.qn, nkt = blk.nkt;
    const int2 qr = blk.qr;
    int kt = blk.kt;
    const uint16_t *qb = q + blk.q_off, *kb = k + blk.kv_off, *vb = v + blk.kv_off;
    wg_stage<HDMAX, BQ>(Qs, qb, a.q_stride, q0, qn, a.hd);
    { /* the first tile; none (all zeros: see the last P V below) if no tile is visited */
        const int k0 = kt < nkt ? kt * BK : 0, kn = kt < nkt ? min(BK, a.seq - k0) : 0;
        wg_stage<HDMAX, BK>(Ks, kb, a.kv_stride, k0, kn, a.hd);
        wg_stage<HDMAX, BK>(Vs, vb, a.kv_stride, k0, kn, a.hd);
    }
    ft_cp_async_commit();

    /* this warpgroup's rows [w0, w0 + 64) and their documents (the granule table is exact
     * here: 64-row spans start on granules); this warp's rows from r0 */
    const int w0 = q0 + 64 * wg, wn = min(64, a.seq - w0), r0 = w0 + 16 * (warp % 4);
    const int2 wr = wn > 0 ? tc_segment_range(a, b, w0, wn) : make_int2(0, 0);

    float o[DT][4], mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int d = 0; d < DT; d++)
        o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;

    /* O += P V of the tile before is issued beside each tile's S = Q K^T, so that the
     * tensor cores work on it while the warpgroup does the tile's softmax: pk holds that
     * P (zero before the first tile, and for a tile the warpgroup skips: O += 0 V), V its
     * key tile in V buffer pv_buf. Every visited tile issues both products, skipped or
     * not (a skipped tile's S is computed and ignored: rare, at windows' and documents'
     * edges), so that no wgmma sits on a path of its own (ptxas serialises them there). */
    uint32_t pk[NT][2];
#pragma unroll
    for (int n = 0; n < NT; n++)
        pk[n][0] = pk[n][1] = 0u;
    int pv_buf = 0;
    auto issue_pv = [&]() {
#pragma unroll
        for (int j = 0; j < BK / 16; j++)
            ft_wgmma_rs<HDMAX, 1>(&o[0][0], &pk[2 * j][0],
                                  wg_desc_mn<BK>(v_addr + pv_buf * C::KV_BYTES, 16 * j), 1);
        ft_wgmma_commit();
    };
    for (int it = 0; kt < nkt; it++) { /* it: visited tiles so far, kt: this one */
        const int k0 = kt * BK, kn = min(BK, a.seq - k0), kbuf = it & 1, vbuf = it % 3;
        ft_cp_async_wait<0>();
        ft_fence_proxy_async(); /* the landed copies visible to wgmma's reads */
        __syncthreads();        /* tile kt visible to all; everyone done with the buffers
                                   the prefetch below overwrites */
        TC_COUNT_TILE(0);
        const int kt_next = tc_next_key_tile<BK>(a, b, qr, kt, nkt);
        if (kt_next < nkt) { /* K into the buffer S of tile it - 1 read, V into the one
                                P V of tile it - 2 read: both finished before the barrier */
            const int n0 = kt_next * BK, nn = min(BK, a.seq - n0);
            wg_stage<HDMAX, BK>(Ks + (kbuf ^ 1) * C::KV_BYTES, kb, a.kv_stride, n0, nn, a.hd);
            wg_stage<HDMAX, BK>(Vs + (it + 1) % 3 * C::KV_BYTES, vb, a.kv_stride, n0, nn, a.hd);
        }
        ft_cp_async_commit();
        kt = kt_next;
        /* warpgroup-uniform: the 64 rows against the tile */
        const int cls = tc_pair_class(a, w0, 64, wr, k0, BK, tc_segment_range(a, b, k0, kn));
        const bool masked = cls == TC_MASKED;
        if (cls != TC_SKIP)
            TC_COUNT_WARP_TILE(3, masked);

        /* S = Q K^T (a fresh accumulator: its first product ignores what it holds), then
         * O += P V of the tile before */
        float s[NT][4];
        ft_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            ft_wgmma_ss<BK>(&s[0][0], wg_desc_k<BQ>(q_addr, 64 * wg, ks),
                            wg_desc_k<BK>(k_addr + kbuf * C::KV_BYTES, 0, ks), ks > 0);
        ft_wgmma_commit();
        issue_pv();
        ft_wgmma_wait<1>(); /* S has landed; P V may still run */
        ft_wgmma_pin(s);

        float alpha[2] = {1.0f, 1.0f};
        bool moved = false;
        if (cls != TC_SKIP) {
            if (masked)
                tc_mask_rows<NT>(s, a, b, r0, k0);
            moved = tc_online_softmax<NT, false>(s, pk, mx, l, alpha, a.scale_log2);
        }
        ft_wgmma_wait<0>(); /* O and pk were the pending product's until now */
        ft_wgmma_pin(o);
        ft_wgmma_pin(pk);
        if (__any_sync(FT_FULL_MASK, moved)) {
            tc_rescale_o<DT>(o, alpha);
        } else if (cls != TC_SKIP) {
            TC_COUNT_WARP(9);
        }
        if (cls != TC_SKIP) {
            tc_pack_p<NT>(s, pk); /* pk[2j .. 2j+1]: the A operand of keys 16j .. 16j+15 */
        } else {
#pragma unroll
            for (int n = 0; n < NT; n++)
                pk[n][0] = pk[n][1] = 0u;
        }
        pv_buf = vbuf;
    }
    /* the last tile's O += P V (with no tile visited: zeros times V buffer 0, which the
     * prologue zero-filled) */
    ft_wgmma_fence();
    issue_pv();
    ft_wgmma_wait<0>();
    ft_wgmma_pin(o);
    ft_cp_async_wait<0>(); /* no copy may still target shared memory at exit */

    OT *ob = out + (size_t)b * a.seq * a.q_stride + (size_t)h * a.hd;
    float *lb = lse + ((size_t)b * gridDim.y + h) * a.seq;
    tc_store_out_rows<DT>(ob, lb, o, mx, l, r0, a);
#else
    (void)out, (void)lse, (void)q, (void)k, (void)v, (void)a;
    __trap(); /* not built for this device: the host does not launch it */
#endif
}

template <int HDMAX, typename OT>
static cudaError_t wg_fwd_run(OT *out, float *lse, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    typedef WgFwdCfg<HDMAX> C;
    /* a launch of its own (not shared with the mma.sync forward's): the harness's op
     * report names launches by their site, which test_attention_tc_h100.sh reads */
    void (*kern)(OT *, float *, const uint16_t *, const uint16_t *, const uint16_t *, TcArgs) =
        attn_fwd_wgmma_kernel<HDMAX, OT>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem);
    if (e != cudaSuccess)
        return e;
    dim3 grid((unsigned)((s.seq_len + C::BQ - 1) / C::BQ), (unsigned)s.n_heads,
              (unsigned)s.batch);
    FT_LAUNCH(kern, grid, WG_THREADS, C::smem, st)(out, lse, q, k, v, a);
    return cudaGetLastError();
}

/* FTMPI_TC_FWD_WGMMA=1 selects this forward where it applies: head_dim <= 256, a
 * compute capability 9.0 device, a build with sm_90a code (FT_CUDA_SM90A, from configure's
 * NVCC_ARCH; always on the harness), and the device's shared memory taking the block.
 * Opt-in until a GPU has timed it (bench/gpu_attention.sh times it beside the default).
 * Read per call, so a test can switch it. */
extern "C" int ft_cuda_attention_tc_fwd_wgmma(ft_attn_shape s)
{
    const char *e = getenv("FTMPI_TC_FWD_WGMMA");
    return e && strcmp(e, "1") == 0 &&
           wg_device_takes(s.head_dim <= 64    ? WgFwdCfg<64>::smem
                           : s.head_dim <= 128 ? WgFwdCfg<128>::smem
                                               : WgFwdCfg<256>::smem);
}

extern "C" int ft_cuda_attention_wgmma_built(void)
{
#if defined(FT_CUDA_EMULATION) || defined(FT_CUDA_SM90A)
    return 1;
#else
    return 0;
#endif
}

cudaError_t tc_fwd_wgmma(float *out, float *lse, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64    ? wg_fwd_run<64>(out, lse, q, k, v, a, s, st)
           : s.head_dim <= 128 ? wg_fwd_run<128>(out, lse, q, k, v, a, s, st)
                               : wg_fwd_run<256>(out, lse, q, k, v, a, s, st);
}

cudaError_t tc_fwd_wgmma(ft_bf16 *out, float *lse, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64    ? wg_fwd_run<64>(out, lse, q, k, v, a, s, st)
           : s.head_dim <= 128 ? wg_fwd_run<128>(out, lse, q, k, v, a, s, st)
                               : wg_fwd_run<256>(out, lse, q, k, v, a, s, st);
}
