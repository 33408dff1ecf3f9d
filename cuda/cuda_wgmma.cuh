/* Warpgroup-level matrix instructions of sm_90a (Hopper's wgmma), one function per PTX
 * instruction as cuda_mma.cuh does for mma.sync, so that the kernels read as math and the
 * harness can stand in for each instruction (test/cudaemu/cudaemu_wgmma.cc).
 *
 * wgmma.mma_async.m64nNk16 (bf16 inputs, fp32 accumulators) is issued by a warpgroup, four
 * consecutive warps whose first warp's index is a multiple of four, all 128 threads
 * converged: D (64 x N) = A (64 x 16) B (16 x N) + (scale_d ? D : 0). B always comes from
 * shared memory through a matrix descriptor; A from a descriptor too, or from registers.
 *
 * Register fragments (PTX ISA "Register Fragments and Shared Memory Matrix Layouts" of
 * wgmma .m64nNk16): warp r of the warpgroup (r = warp % 4) owns rows 16r .. 16r+15; with
 * g = lane / 4 and t = lane % 4, exactly mma.m16n8k16's layouts (cuda_mma.cuh) repeated:
 *   D (fp32, N/2 registers): d[4i + 0..1] = D[16r + g][8i + 2t .. 8i + 2t + 1]
 *                            d[4i + 2..3] = D[16r + g + 8][8i + 2t .. 8i + 2t + 1]
 *   A from registers (4 registers, bf16 pairs, lower index in the lower half):
 *                            a[0] = A[16r + g][2t..2t+1]     a[1] = A[16r + g + 8][2t..2t+1]
 *                            a[2] = A[16r + g][2t+8..2t+9]   a[3] = A[16r + g + 8][2t+8..2t+9]
 * so an m16n8 accumulator pair of a 16-key slice of S is the A operand of P V, as in the
 * mma.sync kernels.
 *
 * Shared-memory operands (PTX ISA "Shared Memory Matrix Layout", "Matrix Descriptor"):
 * this file uses the 128-byte swizzle only. A matrix is K-major when its K index is the
 * contiguous one (A as M x K row-major, B stored as N x K row-major: trans = 0) and
 * MN-major otherwise (B stored as K x N row-major: trans = 1). In units of 16 bytes (8
 * bf16, "T"), the canonical 128-byte-swizzled layouts are, before the swizzle:
 *   K-major:  ((8, m), (T, 2)) : ((8T, SBO), (1, T))  rows of 128 bytes, 8-row groups
 *             SBO bytes apart; a k16 slice is 32 bytes of each row (LBO unused)
 *   MN-major: ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))  MN runs of 64 elements (128
 *             bytes) LBO bytes apart, K rows of 128 bytes, 8-row groups SBO bytes apart
 * and the swizzle XORs byte-address bits 4-6 (the 16-byte chunk in a 128-byte row) with
 * bits 7-9 (the row in an 8-row, 1024-byte atom) of the *shared-memory address*: tiles
 * start on 1024-byte boundaries of the shared window (ft_swz128 below gives the stored
 * position, which is how the copies place each 16-byte chunk).
 *
 * Ordering (PTX ISA "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group", "Async
 * proxy"): wgmma runs asynchronously and reads its registers and shared memory at some
 * point before the wait that covers it:
 *   - ft_wgmma_fence before the first wgmma of a batch, after registers it reads (A, or
 *     the accumulator) were written by other instructions;
 *   - ft_wgmma_commit closes the wgmmas issued since the last commit into a group;
 *     ft_wgmma_wait<N> returns when at most the N newest groups are pending; until then the
 *     accumulators must not be read or written, nor the shared memory they read changed;
 *   - shared memory written by ordinary stores or cp.async (the generic proxy) is seen by
 *     wgmma (the async proxy) only after ft_fence_proxy_async by the writing threads,
 *     then a barrier. */
#ifndef FT_CUDA_WGMMA_CUH
#define FT_CUDA_WGMMA_CUH

#include <stdint.h>

#ifdef FT_CUDA_EMULATION
#include "cudaemu_wgmma.h"
#endif

/* The wgmma instructions exist in sm_90a code only (and on the harness); elsewhere the
 * kernels built on them compile to a trap and the host never launches them
 * (ft_cuda_wgmma_built). */
#if defined(FT_CUDA_EMULATION) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FT_WGMMA_CODE 1
#else
#define FT_WGMMA_CODE 0
#endif

/* The 32-bit shared-window address of a shared-memory pointer (what descriptors hold). */
__device__ __forceinline__ uint32_t ft_smem_address(const void *p)
{
#ifdef FT_CUDA_EMULATION
    return cudaemu_shared_address(p, __FILE__, __LINE__);
#else
    return (uint32_t)__cvta_generic_to_shared(p);
#endif
}

/* Byte offset at which the 16-byte chunk of a 128-byte-swizzled tile is stored: `offset`
 * is the unswizzled byte offset from the tile's start, which lies on a 1024-byte boundary
 * of the shared window (so the offset's bits are the address's). */
__device__ __forceinline__ uint32_t ft_swz128(uint32_t offset)
{
    return offset ^ (((offset >> 7) & 7u) << 4);
}

/* Matrix descriptor of a 128-byte-swizzled operand starting at shared address `addr` (the
 * k slice's unswizzled start: tile start + the slice's byte offset within the row), with
 * leading and stride byte offsets as in the layouts above (multiples of 16). */
__device__ __forceinline__ uint64_t ft_wgmma_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (uint64_t)((lbo >> 4) & 0x3FFFu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFFu) << 32 | (uint64_t)1 << 62; /* 1: 128B swizzle */
}

__device__ __forceinline__ void ft_wgmma_fence(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_wgmma_fence(__FILE__, __LINE__);
#elif FT_WGMMA_CODE
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ft_wgmma_commit(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_wgmma_commit(__FILE__, __LINE__);
#elif FT_WGMMA_CODE
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void ft_wgmma_wait(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_wgmma_wait(N, __FILE__, __LINE__);
#elif FT_WGMMA_CODE
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

/* fence.proxy.async.shared::cta: this thread's earlier generic-proxy writes to shared
 * memory (stores, landed cp.async copies) become visible to the async proxy (wgmma). */
__device__ __forceinline__ void ft_fence_proxy_async(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_fence_proxy_async(__FILE__, __LINE__);
#elif FT_WGMMA_CODE
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/* Pins a wgmma's register operands: an empty instruction that "reads and writes" each
 * element. The compiler sees a wgmma as an ordinary instruction that consumes A and
 * produces D when issued, so without it, it may read D (or reuse A's registers) before
 * the wait that completes the wgmma, or move the accumulators through other registers
 * while a batch owns them (which ptxas answers by serialising every wgmma, warning
 * C7514). Placed after each wait on everything the batch read or wrote, and before each
 * batch on accumulators that live across batches. The harness's wgmma completes at the
 * wait itself: nothing to pin there. */
template <int N>
__device__ __forceinline__ void ft_wgmma_pin(float (&d)[N][4])
{
#if !defined(FT_CUDA_EMULATION)
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])::"memory");
#else
    (void)d;
#endif
}

template <int N>
__device__ __forceinline__ void ft_wgmma_pin(uint32_t (&a)[N][2])
{
#if !defined(FT_CUDA_EMULATION)
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(a[i][0]), "+r"(a[i][1])::"memory");
#else
    (void)a;
#endif
}

#define FT_WG_F8(d, i)                                                                             \
    "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]),      \
        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define FT_WG_F32(d) FT_WG_F8(d, 0), FT_WG_F8(d, 8), FT_WG_F8(d, 16), FT_WG_F8(d, 24)
#define FT_WG_F64(d) FT_WG_F32(d), FT_WG_F8(d, 32), FT_WG_F8(d, 40), FT_WG_F8(d, 48), FT_WG_F8(d, 56)
#define FT_WG_F128(d)                                                                              \
    FT_WG_F64(d), FT_WG_F8(d, 64), FT_WG_F8(d, 72), FT_WG_F8(d, 80), FT_WG_F8(d, 88),              \
        FT_WG_F8(d, 96), FT_WG_F8(d, 104), FT_WG_F8(d, 112), FT_WG_F8(d, 120)
#define FT_WG_D128                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
    "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
    "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, " \
    "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, " \
    "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, " \
    "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, " \
    "%122, %123, %124, %125, %126, %127}"
#define FT_WG_D32                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FT_WG_D64                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "    \
    "%56, %57, %58, %59, %60, %61, %62, %63}"

/* D (this thread's N/2 accumulators) = A B + (scale_d ? D : 0), m64nNk16, A and B from
 * shared memory (both K-major: A's rows are M, B's stored rows are N). N = 64 or 128. */
template <int N>
__device__ __forceinline__ void ft_wgmma_ss(float d[N / 2], uint64_t desc_a, uint64_t desc_b,
                                            int scale_d)
{
    static_assert(N == 64 || N == 128, "m64nNk16 with N = 64 or 128");
#ifdef FT_CUDA_EMULATION
    cudaemu_wgmma_bf16(d, N, NULL, desc_a, desc_b, scale_d, 0, __FILE__, __LINE__);
#elif FT_WGMMA_CODE
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FT_WG_D32
                     ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : FT_WG_F32(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FT_WG_D64
                     ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                     : FT_WG_F64(d)
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#else
    (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
#endif
}

/* D = A B + (scale_d ? D : 0), m64nNk16 (N = 64, 128 or 256), A from this thread's four
 * registers (the layout above), B from shared memory, K-major (TRANS_B = 0) or MN-major
 * (TRANS_B = 1). */
template <int N, int TRANS_B>
__device__ __forceinline__ void ft_wgmma_rs(float d[N / 2], const uint32_t a[4], uint64_t desc_b,
                                            int scale_d)
{
    static_assert(N == 64 || N == 128 || N == 256, "m64nNk16 with N = 64, 128 or 256");
#ifdef FT_CUDA_EMULATION
    cudaemu_wgmma_bf16(d, N, a, 0, desc_b, scale_d, TRANS_B, __FILE__, __LINE__);
#elif FT_WGMMA_CODE
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FT_WG_D32
                     ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                     : FT_WG_F32(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),
                       "n"(TRANS_B));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FT_WG_D64
                     ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                     : FT_WG_F64(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),
                       "n"(TRANS_B));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " FT_WG_D128
                     ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                     : FT_WG_F128(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),
                       "n"(TRANS_B));
#else
    (void)d, (void)a, (void)desc_b, (void)scale_d;
#endif
}

#endif
