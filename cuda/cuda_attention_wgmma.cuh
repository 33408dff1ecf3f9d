/* Shared pieces of the attention kernels on Hopper's warpgroup MMA (cuda_attention_wgmma.cu:
 * forward, cuda_attention_wgmma_bwd.cu: backward): blocks of two warpgroups, token tiles
 * staged by cp.async into 128-byte-swizzled shared memory, and the matrix descriptors
 * that read a tile as either operand layout.
 *
 * A token tile (ROWS tokens of one head, head_dim <= HDMAX features) is stored as HDMAX / 64
 * blocks of [ROWS][64 features], 128 bytes a row (the swizzle's width), each row's 16-byte
 * chunks permuted by ft_swz128, on a 1024-byte boundary of the shared window. The same
 * bytes serve as:
 *   - K-major (wg_desc_k): the tokens are the M rows of A or the N rows of B (S = Q K^T: Q
 *     as A, K as B), a k16 slice being 32 bytes of each row of one feature block;
 *   - MN-major (wg_desc_mn): the tokens are the K rows of B and the features its N
 *     columns (O += P V: V as B), the feature blocks ROWS * 128 bytes apart (LBO), 8-token
 *     groups 1024 (SBO). */
#ifndef FT_CUDA_ATTENTION_WGMMA_CUH
#define FT_CUDA_ATTENTION_WGMMA_CUH

#include "cuda_attention_tc.cuh"
#include "cuda_wgmma.cuh"

#define WG_THREADS 256 /* two warpgroups */

/* Stages rows t0 .. t0+n-1 of one head (hd bf16 each, stride elements apart) into the
 * token tile at `tile` (ROWS rows); rows >= n and features >= hd zero-filled. */
template <int HDMAX, int ROWS>
__device__ __forceinline__ void wg_stage(uint8_t *tile, const uint16_t *base, size_t stride,
                                         int t0, int n, int hd)
{
    constexpr int CHUNKS = HDMAX / 8;
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += WG_THREADS) {
        const int r = idx / CHUNKS, c = idx % CHUNKS, d0 = c * 8;
        const bool valid = r < n && d0 < hd;
        const uint16_t *src = valid ? base + (size_t)(t0 + r) * stride + d0 : base;
        const uint32_t off = (uint32_t)(c / 8) * ROWS * 128 + ft_swz128(r * 128 + (c % 8) * 16);
        ft_cp_async_16(tile + off, src, valid ? 16 : 0);
    }
}

/* K-major descriptor of a token tile at shared address `tile` (ROWS rows): rows row0 ..
 * (64 for A, N for B), k slice ks (features 16 ks .. 16 ks + 15). */
template <int ROWS>
__device__ __forceinline__ uint64_t wg_desc_k(uint32_t tile, int row0, int ks)
{
    return ft_wgmma_desc_sw128(tile + (ks / 4) * ROWS * 128 + row0 * 128 + (ks % 4) * 32, 16,
                               1024);
}

/* MN-major descriptor of a token tile (ROWS rows) as B: tokens k0 .. k0 + 15 (k0 a
 * multiple of 8) by all of its features. */
template <int ROWS>
__device__ __forceinline__ uint64_t wg_desc_mn(uint32_t tile, int k0)
{
    return ft_wgmma_desc_sw128(tile + k0 * 128, ROWS * 128, 1024);
}

/* The block's dynamic shared memory from its first 1024-byte boundary (the swizzle's
 * atom): the generic pointer, and its shared-window address in *addr. Launches ask for
 * 1024 bytes more than the tiles need. */
__device__ __forceinline__ uint8_t *wg_smem_aligned(uint8_t *raw, uint32_t *addr)
{
    const uint32_t raw_addr = ft_smem_address(raw), pad = (1024u - (raw_addr & 1023u)) & 1023u;
    *addr = raw_addr + pad;
    return raw + pad;
}

/* Whether the device takes a kernel of these instructions with `smem` bytes of shared
 * memory: compute capability 9.0, a build with sm_90a code (always on the harness), the
 * block's shared memory within the device's opt-in limit. */
static inline bool wg_device_takes(size_t smem)
{
    int dev = 0, major = 0;
    return ft_cuda_attention_wgmma_built() && cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) ==
               cudaSuccess &&
           major == 9 && tc_device_smem_takes(smem);
}

#endif
