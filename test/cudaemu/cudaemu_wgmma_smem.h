/* The shared-memory side of the harness's wgmma (cudaemu_wgmma_smem.cc): matrix
 * descriptors decoded into element addresses of the shared window, bounds-checked reads
 * of the block's dynamic shared memory, and the async-proxy bookkeeping of
 * fence.proxy.async (which cp.async copies have landed in shared memory without their
 * thread's fence since). Internal to the harness: cudaemu_wgmma.cc and
 * cudaemu_warp_matrix.cc include it. */
#ifndef FT_CUDAEMU_WGMMA_SMEM_H
#define FT_CUDAEMU_WGMMA_SMEM_H

#include <stddef.h>
#include <stdint.h>

/* One operand of wgmma.mma_async.m64nNk16 (bf16) in shared memory, as its descriptor and
 * major-ness (the instruction's imm-trans bit) describe it. */
struct cudaemu_wg_operand {
    uint64_t desc;
    bool mn_major;   /* imm-trans 1: the M (or N) index is the contiguous one */
    const char *name; /* "A" or "B", for messages */
};

/* Reads rows mn0 .. mn0 + rows - 1 (the M index of A, the N index of B) and k = 0..15 of
 * the operand as bf16 bits: out[(mn - mn0) * 16 + k]. Fails, naming the wgmma at
 * file:line, on a descriptor the harness does not model (a non-zero matrix base offset)
 * and on any byte outside the block's dynamic shared memory; with check_proxy, also on a
 * byte that a cp.async landed in without a fence.proxy.async by its thread since. */
void cudaemu_wg_read_operand(const cudaemu_wg_operand &op, int mn0, int rows, uint16_t *out,
                             bool check_proxy, const char *file, int line);

/* The shared-window address of operand element (mn, k), for messages and tests. */
uint32_t cudaemu_wg_element_address(const cudaemu_wg_operand &op, int mn, int k);

/* cp.async's copy of `bytes` bytes landed at dst (cudaemu_cp_async_wait): the running
 * thread's generic-proxy write, unseen by wgmma until it executes fence.proxy.async. */
void cudaemu_async_proxy_landed(const void *dst, size_t bytes);

/* The running thread's linear index in its block. */
int cudaemu_wg_thread_index(void);

#endif
