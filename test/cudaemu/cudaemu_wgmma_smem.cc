/* wgmma's shared-memory operands on the CPU execution harness, written from the PTX ISA
 * ("Matrix Descriptor" and "Shared Memory Matrix Layout" of the asynchronous warpgroup
 * matrix instructions), not from the kernels that use them.
 *
 * The shared window. A descriptor holds 14 bits of a shared-window address (bits 4-17)
 * and the swizzle modes XOR address bits 4-6 with bits 7-9, so what matters of an address
 * is its offset from a 1024-byte boundary. The harness maps only the block's dynamic
 * shared memory (a malloc'ed block, deliberately not aligned to 1024 bytes): an address is
 * the offset from the dynamic memory's base rounded down to 1024 bytes, so its low ten
 * bits are the host pointer's. A kernel that aligns its tiles to 1024 bytes of shared
 * address therefore sees the hardware's swizzle; one that forgets reads a garbled tile,
 * as it would on a GPU. Static __shared__ arrays are not in the window.
 *
 * Descriptor (64 bits): start address >> 4 in bits 0-13, leading dimension byte offset
 * (LBO) >> 4 in bits 16-29, stride dimension byte offset (SBO) >> 4 in bits 32-45, matrix
 * base offset in bits 49-51 (non-zero only for swizzle patterns that do not start on
 * their repeat boundary: not modelled, a finding), swizzle mode in bits 62-63: 0 none
 * (interleave), 1 128-byte, 2 64-byte, 3 32-byte.
 *
 * Canonical layouts, in bf16 elements, T = 8 (16 bytes), before Swizzle<S,4,3> (S = 3, 2,
 * 1, 0 for 128B, 64B, 32B, none: address bits [4, 4+S) ^= bits [7, 7+S)) is applied to
 * the byte address; the first mode is the M (N) index, the second K:
 *   K-major   none  ((8,m),(T,2k)) : ((T,SBO),(1,LBO))
 *             W-byte swizzle ((8,m),(T,2k)) : ((W/2,SBO),(1,T))  (LBO unused)
 *   MN-major  none  ((T,1,m),(8,k)) : ((1,T,SBO),(T,LBO))
 *             W-byte swizzle ((T,W/16,m),(8,k)) : ((1,T,LBO),(W/2,SBO))
 *
 * fence.proxy.async. wgmma reads shared memory through the async proxy; a thread's
 * writes through the generic proxy (here: the cp.async copies that landed at its
 * cp.async.wait_group) are visible to it only after that thread's fence.proxy.async.
 * Each landed 4-byte granule of dynamic shared memory records its thread and that
 * thread's fence count at landing; a wgmma reading a granule whose thread has not fenced
 * since is a finding. Plain stores are not tracked (the harness cannot see them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu_device.h"
#include "cudaemu_wgmma.h"
#include "cudaemu_wgmma_smem.h"

namespace {

/* The window's origin: the dynamic shared memory's base rounded down to 1024 bytes. */
uintptr_t window_origin() { return (uintptr_t)cudaemu_cur_block.dynamic_smem & ~(uintptr_t)1023; }

/* ---------------------------------------------------------------- fence.proxy.async */

struct proxy_block {
    uintptr_t base;
    size_t granules;
    int32_t *owner;   /* per 4-byte granule: the thread whose cp.async landed there, or -1 */
    uint32_t *epoch;  /* that thread's fence count when it landed */
    uint32_t *fences; /* per thread: fence.proxy.async executed */
};

void proxy_end(void *p)
{
    proxy_block *s = (proxy_block *)p;
    if (!s)
        return;
    free(s->owner);
    free(s->epoch);
    free(s->fences);
    free(s);
}

proxy_block *proxy_state(bool create)
{
    void **slot = cudaemu_block_ext(proxy_end);
    if (!*slot && create) {
        const dim3 bd = cudaemu_cur_block.dim;
        size_t g = (cudaemu_cur_block.dynamic_smem_bytes + 3) / 4;
        proxy_block *s = (proxy_block *)calloc(1, sizeof *s);
        if (s) {
            s->base = (uintptr_t)cudaemu_cur_block.dynamic_smem;
            s->granules = g;
            s->owner = (int32_t *)malloc(g * sizeof *s->owner + 1);
            s->epoch = (uint32_t *)malloc(g * sizeof *s->epoch + 1);
            s->fences = (uint32_t *)calloc((size_t)bd.x * bd.y * bd.z, sizeof *s->fences);
        }
        if (!s || !s->owner || !s->epoch || !s->fences)
            cudaemu_fail("out of host memory for the fence.proxy.async state");
        memset(s->owner, 0xFF, g * sizeof *s->owner);
        *slot = s;
    }
    return (proxy_block *)*slot;
}

/* The granule's thread if it holds a landed copy that thread has not fenced, else -1. */
int unfenced_writer(uintptr_t host)
{
    proxy_block *s = proxy_state(false);
    if (!s || host < s->base || host >= s->base + 4 * s->granules)
        return -1;
    size_t i = (host - s->base) / 4;
    int32_t t = s->owner[i];
    return t >= 0 && s->epoch[i] == s->fences[t] ? t : -1;
}

/* ---------------------------------------------------------------- descriptors */

struct layout {
    uint32_t start, lbo, sbo; /* bytes */
    int swz;                  /* S of Swizzle<S,4,3>: 0 none, 1 32B, 2 64B, 3 128B */
};

layout decode(const cudaemu_wg_operand &op, const char *file, int line)
{
    uint64_t d = op.desc;
    unsigned base_offset = (unsigned)(d >> 49) & 7u;
    if (base_offset)
        cudaemu_fail("wgmma at %s:%d: operand %s's descriptor 0x%016llx has matrix base offset "
                     "%u: the harness models only base offset 0 (the swizzle pattern starting "
                     "on its repeat boundary, e.g. 1024 bytes for the 128-byte swizzle)",
                     file, line, op.name, (unsigned long long)d, base_offset);
    static const int swz_of_mode[4] = {0, 3, 2, 1}; /* bits 62-63: none, 128B, 64B, 32B */
    layout L;
    L.start = (uint32_t)(d & 0x3FFFu) << 4;
    L.lbo = (uint32_t)((d >> 16) & 0x3FFFu) << 4;
    L.sbo = (uint32_t)((d >> 32) & 0x3FFFu) << 4;
    L.swz = swz_of_mode[(d >> 62) & 3u];
    return L;
}

uint32_t element_address(const layout &L, bool mn_major, int mn, int k)
{
    uint32_t off;
    if (L.swz == 0) {
        /* core matrices of 8 x 16 bytes; K-major: LBO between the two 8-column halves of
         * K, SBO between 8-row groups; MN-major: the roles swap */
        if (!mn_major)
            off = 2u * (k % 8) + L.lbo * (k / 8) + 16u * (mn % 8) + L.sbo * (mn / 8);
        else
            off = 2u * (mn % 8) + L.sbo * (mn / 8) + 16u * (k % 8) + L.lbo * (k / 8);
    } else {
        uint32_t w = 16u << L.swz; /* the swizzle's row: 32, 64 or 128 bytes */
        if (!mn_major) /* a k16 slice is 32 contiguous bytes of each row */
            off = 2u * k + w * (mn % 8) + L.sbo * (mn / 8);
        else /* runs of w / 2 elements of MN, LBO apart; 8 K rows of w bytes, SBO apart */
            off = 2u * (mn % (w / 2)) + L.lbo * (mn / (w / 2)) + w * (k % 8) + L.sbo * (k / 8);
    }
    uint32_t a = L.start + off;
    uint32_t mask = (1u << L.swz) - 1u;
    return a ^ (((a >> 7) & mask) << 4);
}

} // namespace

uint32_t cudaemu_shared_address(const void *p, const char *file, int line)
{
    const char *lo = (const char *)cudaemu_cur_block.dynamic_smem;
    size_t n = cudaemu_cur_block.dynamic_smem_bytes;
    const char *c = (const char *)p;
    if (!lo || c < lo || c >= lo + n)
        cudaemu_fail("shared-window address at %s:%d: %p is not in the block's dynamic shared "
                     "memory [%p, +%zu) (the harness maps only dynamic shared memory into the "
                     "window that wgmma descriptors address)",
                     file, line, p, (const void *)lo, n);
    return (uint32_t)((uintptr_t)c - window_origin());
}

uint32_t cudaemu_wg_element_address(const cudaemu_wg_operand &op, int mn, int k)
{
    return element_address(decode(op, "?", 0), op.mn_major, mn, k);
}

void cudaemu_wg_read_operand(const cudaemu_wg_operand &op, int mn0, int rows, uint16_t *out,
                             bool check_proxy, const char *file, int line)
{
    layout L = decode(op, file, line);
    uintptr_t origin = window_origin();
    uintptr_t lo = (uintptr_t)cudaemu_cur_block.dynamic_smem;
    uintptr_t hi = lo + cudaemu_cur_block.dynamic_smem_bytes;
    for (int mn = mn0; mn < mn0 + rows; mn++)
        for (int k = 0; k < 16; k++) {
            uint32_t a = element_address(L, op.mn_major, mn, k);
            uintptr_t h = origin + a;
            if (!lo || h < lo || h + 2 > hi)
                cudaemu_fail("wgmma at %s:%d: operand %s (descriptor 0x%016llx, %s-major) element "
                             "(%d, k %d) is at shared-window address 0x%x, outside the block's "
                             "dynamic shared memory (0x%x .. 0x%x)",
                             file, line, op.name, (unsigned long long)op.desc,
                             op.mn_major ? "MN" : "K", mn, k, a, (unsigned)(lo - origin),
                             (unsigned)(hi - origin));
            if (check_proxy) {
                int t = unfenced_writer(h);
                if (t >= 0)
                    cudaemu_fail("wgmma at %s:%d: operand %s element (%d, k %d) at shared-window "
                                 "address 0x%x was written by thread %d's cp.async, which landed "
                                 "after that thread's last fence.proxy.async: the ISA requires "
                                 "the writing thread's fence.proxy.async (then a barrier) before "
                                 "wgmma, which reads through the async proxy, sees the write",
                                 file, line, op.name, mn, k, a, t);
            }
            uint16_t v;
            memcpy(&v, (const void *)h, 2);
            out[(mn - mn0) * 16 + k] = v;
        }
}

int cudaemu_wg_thread_index(void)
{
    const dim3 bd = cudaemu_cur_block.dim;
    return (int)(threadIdx.x + bd.x * (threadIdx.y + bd.y * threadIdx.z));
}

void cudaemu_async_proxy_landed(const void *dst, size_t bytes)
{
    uintptr_t lo = (uintptr_t)cudaemu_cur_block.dynamic_smem, p = (uintptr_t)dst;
    if (!lo || p < lo || p >= lo + cudaemu_cur_block.dynamic_smem_bytes)
        return; /* static shared memory: wgmma cannot address it here */
    proxy_block *s = proxy_state(true);
    int t = cudaemu_wg_thread_index();
    for (uintptr_t a = p & ~(uintptr_t)3; a < p + bytes && a < lo + 4 * s->granules; a += 4) {
        size_t i = (a - lo) / 4;
        s->owner[i] = t;
        s->epoch[i] = s->fences[t];
    }
}

void cudaemu_fence_proxy_async(const char *file, int line)
{
    (void)file, (void)line;
    proxy_block *s = proxy_state(false);
    if (s) /* without the state no copy has landed yet: nothing to make visible */
        s->fences[cudaemu_wg_thread_index()]++;
}
