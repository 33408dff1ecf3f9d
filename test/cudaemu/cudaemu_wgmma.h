/* The warpgroup matrix instructions of cuda/cuda_wgmma.cuh on the CPU execution harness:
 * wgmma.mma_async.m64nNk16 (bf16 x bf16 + fp32; A from shared memory or registers, B from
 * shared memory through 128-byte-swizzled matrix descriptors), wgmma.fence,
 * wgmma.commit_group, wgmma.wait_group, fence.proxy.async, and the shared-window address
 * that descriptors hold. Included by cuda_wgmma.cuh in the emulation build only. */
#ifndef FT_CUDAEMU_WGMMA_H
#define FT_CUDAEMU_WGMMA_H

#include <stdint.h>

/* The shared-window address of p, which must lie in the running block's dynamic shared
 * memory: its offset from the 1024-byte boundary at or below the block's dynamic shared
 * memory base, so that an address's low 10 bits are those of p (the swizzle's bits). */
uint32_t cudaemu_shared_address(const void *p, const char *file, int line);

void cudaemu_wgmma_fence(const char *file, int line);
void cudaemu_wgmma_commit(const char *file, int line);
void cudaemu_wgmma_wait(int pending, const char *file, int line);
void cudaemu_fence_proxy_async(const char *file, int line);

/* One thread's part of wgmma.mma_async.m64nNk16.f32.bf16.bf16: d holds its n / 2
 * accumulators; a_regs its four A registers, or NULL for A from desc_a (K-major);
 * trans_b 0: B K-major, 1: MN-major. The results land in d at the wait_group that covers
 * the instruction's group. */
void cudaemu_wgmma_bf16(float *d, int n, const uint32_t *a_regs, uint64_t desc_a, uint64_t desc_b,
                        int scale_d, int trans_b, const char *file, int line);

#endif
