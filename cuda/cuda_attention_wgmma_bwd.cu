/* The deterministic two-pass attention backward of cuda_attention_tc_bwd.cu (same
 * arguments, masks, tile skipping and summation order per element: over query tiles for
 * dK and dV, over key tiles for dQ, each in order) with its products issued per
 * warpgroup by Hopper's wgmma from shared memory (cuda_attention_wgmma.cuh), for
 * FTMPI_TC_BWD_WGMMA=1 on compute capability 9.0 (ft_cuda_attention_tc_bwd_wgmma).
 *
 * dK/dV pass (wg_bwd_dkdv_kernel): a block of two warpgroups per 128 keys (kv head, batch
 * row); warpgroup w owns keys 64w .. 64w+63 and their dK and dV accumulators (64 x
 * head_dim fp32 each: 2 x head_dim / 2 registers a thread); it walks 64-query tiles of
 * every query head of its GQA group, double buffered:
 *   S^T = K Q^T, dP^T = V dO^T   wgmma m64n64k16, K or V as A and Q or dO as B, all
 *                                K-major from shared memory (head_dim / 16 each);
 *   P^T = 2^(S^T c - lse), masked where needed; dS^T = P^T (dP^T - D); both to bf16 pairs;
 *   dV += P^T dO, dK += dS^T Q   wgmma m64n{hd}k16, A from those registers (keys as
 *                                rows), dO and Q as B, MN-major, 4 steps of 16 queries;
 * at head_dim 64 a tile's gradient products run beside the next tile's scores and the
 * warpgroup's P^T and dS^T (the forward's overlap; three Q/dO buffers); at 128, dK and dV
 * leave no registers for it (WgBwdCfg::OVERLAP).
 * dQ pass (wg_bwd_dq_kernel): a block of two warpgroups per 128 queries (head, batch
 * row); warpgroup w owns queries 64w .. and their dQ; it walks 64-key tiles:
 *   S = Q K^T, dP = dO V^T       m64n64k16, Q or dO as A, K or V as B, K-major;
 *   dS = P (dP - D), bf16;
 *   dQ += dS K                   m64n{hd}k16, A = dS from registers, K as B, MN-major;
 * a tile's dQ product issued beside the next tile's S and dP, so that the tensor cores
 * work on it while the warpgroup computes that tile's dS (the forward's overlap).
 * Each warpgroup classifies its 64 rows against the tile (tc_pair_class): skipped,
 * masked element by element, or bare.
 *
 * Shared memory, head_dim 128: dK/dV 130 KiB (K, V of 128 keys; two Q and dO tiles of 64
 * queries; their lse and D), dQ 145 KiB (Q, dO of 128 queries; three K and two V tiles of
 * 64 keys). ptxas (CUDA 13): dQ 210 registers at head_dim 128, 175 at 64; dK/dV 254-255
 * at 128 (with bf16 outputs 100 bytes of spill: a few accumulators stored and reloaded
 * around each tile's gradient products), 210 at 64. The kernels:
 * cuda_attention_wgmma_bwd_dkdv.cuh, cuda_attention_wgmma_bwd_dq.cuh. */
#include "cuda_attention_wgmma_bwd_dkdv.cuh"
#include "cuda_attention_wgmma_bwd_dq.cuh"

#include <stdlib.h>
#include <string.h>

template <int HDMAX, typename OT>
static cudaError_t wg_bwd_run(OT *dq, OT *dk, OT *dv, const uint16_t *dout, const float *lse,
                              const float *Dv, const uint16_t *q, const uint16_t *k,
                              const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    typedef WgBwdCfg<HDMAX> C;
    void (*kkv)(OT *, OT *, const uint16_t *, const float *, const float *, const uint16_t *,
                const uint16_t *, const uint16_t *, TcArgs, int) = wg_bwd_dkdv_kernel<HDMAX, OT>;
    cudaError_t e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem_dkdv);
    if (e != cudaSuccess)
        return e;
    dim3 gkv((unsigned)((s.seq_len + C::BKV - 1) / C::BKV), (unsigned)s.n_kv_heads,
             (unsigned)s.batch);
    FT_LAUNCH(kkv, gkv, WG_THREADS, C::smem_dkdv, st)(dk, dv, dout, lse, Dv, q, k, v, a,
                                                      s.n_heads);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    void (*kq)(OT *, const uint16_t *, const float *, const float *, const uint16_t *,
               const uint16_t *, const uint16_t *, TcArgs, int) = wg_bwd_dq_kernel<HDMAX, OT>;
    e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::smem_dq);
    if (e != cudaSuccess)
        return e;
    dim3 gq((unsigned)((s.seq_len + C::BQ_DQ - 1) / C::BQ_DQ), (unsigned)s.n_heads,
            (unsigned)s.batch);
    FT_LAUNCH(kq, gq, WG_THREADS, C::smem_dq, st)(dq, dout, lse, Dv, q, k, v, a, s.n_heads);
    return cudaGetLastError();
}

/* FTMPI_TC_BWD_WGMMA=1 selects this backward where it applies: the deterministic two
 * passes (not FTMPI_ATTENTION_NONDETERMINISTIC=1's one pass), head_dim <= 128, and a
 * device and build that take wgmma (wg_device_takes). Opt-in until a GPU has timed it
 * (bench/gpu_attention.sh). Read per call, so a test can switch it. */
extern "C" int ft_cuda_attention_tc_bwd_wgmma(ft_attn_shape s)
{
    const char *e = getenv("FTMPI_TC_BWD_WGMMA"), *nd = getenv("FTMPI_ATTENTION_NONDETERMINISTIC");
    if (!e || strcmp(e, "1") != 0 || s.head_dim > 128 || (nd && strcmp(nd, "1") == 0))
        return 0;
    const size_t kv = s.head_dim <= 64 ? WgBwdCfg<64>::smem_dkdv : WgBwdCfg<128>::smem_dkdv;
    const size_t dq = s.head_dim <= 64 ? WgBwdCfg<64>::smem_dq : WgBwdCfg<128>::smem_dq;
    return wg_device_takes(kv > dq ? kv : dq);
}

cudaError_t tc_bwd_wgmma(float *dq, float *dk, float *dv, const uint16_t *dout, const float *lse,
                         const float *Dv, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                         const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64 ? wg_bwd_run<64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st)
                            : wg_bwd_run<128>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st);
}

cudaError_t tc_bwd_wgmma(ft_bf16 *dq, ft_bf16 *dk, ft_bf16 *dv, const uint16_t *dout,
                         const float *lse, const float *Dv, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, const TcArgs &a, ft_attn_shape s, cudaStream_t st)
{
    return s.head_dim <= 64 ? wg_bwd_run<64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st)
                            : wg_bwd_run<128>(dq, dk, dv, dout, lse, Dv, q, k, v, a, s, st);
}
