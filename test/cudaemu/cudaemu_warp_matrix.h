/* The warp-level matrix instructions of cuda/cuda_mma.cuh on the CPU execution harness:
 * mma.sync.m16n8k16 (bf16 x bf16 + fp32), ldmatrix.m8n8 (x1/x2/x4, .trans) and cp.async
 * with its groups, and the conversion that feeds the A operand, cvt.rn.bf16x2.f32.
 * Included by cuda_mma.cuh in the emulation build only. */
#ifndef FT_CUDAEMU_WARP_MATRIX_H
#define FT_CUDAEMU_WARP_MATRIX_H

#include <stdint.h>

void cudaemu_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                               const float c[4], const char *file, int line);
void cudaemu_ldmatrix(uint32_t *r, int count, bool trans, const void *smem_row, const char *file,
                      int line);
void cudaemu_cp_async(void *smem_dst, const void *gmem_src, int bytes, int src_bytes,
                      const char *file, int line);
void cudaemu_cp_async_commit(void);
void cudaemu_cp_async_wait(int newest_in_flight, const char *file, int line);
uint32_t cudaemu_cvt_rn_bf16x2_f32(float a, float b);

#endif
