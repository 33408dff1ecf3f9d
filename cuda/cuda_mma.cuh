/* Warp-level matrix instructions for the tensor-core kernels (sm_80 and later), one
 * function per PTX instruction so that the kernels read as math and the harness can
 * stand in for each instruction exactly (test/cudaemu/cudaemu_warp_matrix.cc).
 *
 * Fragment layouts are the PTX ISA's ("Matrix fragments for mma.m16n8k16", "ldmatrix");
 * with g = lane / 4 and t = lane % 4, and two bf16 per 32-bit register (the lower half
 * holds the lower column or row index):
 *   A (16x16, row-major):  a[0] = A[g][2t..2t+1]    a[1] = A[g+8][2t..2t+1]
 *                          a[2] = A[g][2t+8..2t+9]  a[3] = A[g+8][2t+8..2t+9]
 *   B (16x8, "col"):       b[0] = B[2t..2t+1][g]    b[1] = B[2t+8..2t+9][g]
 *   C, D (16x8, fp32):     c[0..1] = C[g][2t..2t+1] c[2..3] = C[g+8][2t..2t+1]
 * ldmatrix.x4 of a row-major 16x16 bf16 tile, lane l pointing at row l % 16, column
 * 8 * (l / 16), yields exactly the A fragment; ldmatrix.x2 of an N x K (row-major B^T)
 * tile the B fragment, and ldmatrix.x2.trans of a K x N row-major tile the B fragment too.
 *
 * cp.async copies global memory to shared memory without registers; the copies issued
 * since the last commit form a group, and wait<N> returns when at most the N newest
 * groups are still in flight. A barrier is still needed before other threads read. */
#ifndef FT_CUDA_MMA_CUH
#define FT_CUDA_MMA_CUH

#include <stdint.h>

#ifdef FT_CUDA_EMULATION
#include "cudaemu_warp_matrix.h"
#endif

/* D = A B + C: one m16n8k16 tensor-core product of bf16 inputs with fp32 accumulation,
 * executed by the whole warp (all 32 lanes, converged). */
__device__ __forceinline__ void ft_mma_m16n8k16_bf16(float d[4], const uint32_t a[4],
                                                     const uint32_t b[2], const float c[4])
{
#ifdef FT_CUDA_EMULATION
    cudaemu_mma_m16n8k16_bf16(d, a, b, c, __FILE__, __LINE__);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

/* ldmatrix.m8n8.b16: `count` (1, 2 or 4) 8x8 matrices of 16-bit elements from shared
 * memory; lane 8i + j gives the address of row j of matrix i (16 bytes, 16-byte aligned);
 * r[i] receives this lane's two elements of matrix i (transposed with `trans`). */
template <int COUNT, bool TRANS>
__device__ __forceinline__ void ft_ldmatrix(uint32_t r[COUNT], const void *smem_row)
{
    static_assert(COUNT == 1 || COUNT == 2 || COUNT == 4, "ldmatrix loads 1, 2 or 4 matrices");
#ifdef FT_CUDA_EMULATION
    cudaemu_ldmatrix(r, COUNT, TRANS, smem_row, __FILE__, __LINE__);
#else
    unsigned addr = (unsigned)__cvta_generic_to_shared(smem_row);
    if (COUNT == 1 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0]) : "r"(addr));
    else if (COUNT == 1)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                     : "=r"(r[0]) : "r"(addr));
    else if (COUNT == 2 && !TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    else if (COUNT == 2)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    else if (!TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}

/* cp.async.cg (16 bytes, L2 only): shared[dst] = global[src], both 16-byte aligned; with
 * src_bytes < 16 only that many bytes are read and the rest of the 16 are zero-filled
 * (tile edges). */
__device__ __forceinline__ void ft_cp_async_16(void *smem_dst, const void *gmem_src,
                                               int src_bytes = 16)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_cp_async(smem_dst, gmem_src, 16, src_bytes, __FILE__, __LINE__);
#else
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(gmem_src), "r"(src_bytes));
#endif
}

/* Closes the group of copies issued since the last commit. */
__device__ __forceinline__ void ft_cp_async_commit(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Waits until at most N committed groups (the newest) are still in flight. */
template <int N>
__device__ __forceinline__ void ft_cp_async_wait(void)
{
#ifdef FT_CUDA_EMULATION
    cudaemu_cp_async_wait(N, __FILE__, __LINE__);
#else
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
#endif
}

/* cvt.rn.bf16x2.f32: a and b rounded to bf16 (nearest even), a into the upper half of
 * the result and b into the lower, as an mma A or B operand register holds a pair (the
 * lower index in the lower half). One instruction for two values. */
__device__ __forceinline__ uint32_t ft_cvt_rn_bf16x2(float a, float b)
{
#ifdef FT_CUDA_EMULATION
    return cudaemu_cvt_rn_bf16x2_f32(a, b);
#else
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(a), "f"(b));
    return d;
#endif
}

#endif
