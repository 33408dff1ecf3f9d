/* The CPU execution harness for CUDA: device and pinned memory, copies and memsets.
 *
 * Every device allocation is its own heap block (posix_memalign at 256 bytes, CUDA's
 * alignment, of exactly the requested size), so an ASan build sees an access one byte
 * past it; new device memory is filled with 0xFF bytes (a NaN as fp32 and as bf16) so
 * that reading memory nothing wrote shows in the results. Live allocations are in the
 * device registry (cudaemu_alloc.c); freeing anything else is a finding.
 *
 * cudaFreeAsync is stream-ordered: the pointer stops being live for new work at once
 * (queuing work that uses it is a finding), and the block is released when the stream
 * reaches the free. The free counts as a write of the whole allocation for the race
 * check, so freeing memory another stream still uses without ordering is a finding.
 * cudaFree synchronises the device first, as CUDA's implicit synchronisation does.
 *
 * Copies are queued on their stream with their device accesses. Host memory is read or
 * written when the copy runs, except where CUDA's rules for pageable memory make the
 * call synchronous: a copy from pageable memory is staged at the call (the caller may
 * reuse its buffer at once), a copy to pageable memory returns only once it is done
 * (the stream is forced, and the host is then ordered after it). Pinned memory
 * (cudaMallocHost) gets truly asynchronous copies, with their hazards. */
#define _POSIX_C_SOURCE 200809L /* strdup, posix_memalign */
#include "cudaemu_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICE_ALIGN 256
#define POISON 0xFF

/* Process-wide: the pinned host blocks, and the device memory accounting. */
static cudaemu_registry g_pinned;
static size_t g_in_use, g_peak;
static size_t g_live_blocks;

/* ---------------------------------------------------------------- accounting */

void cudaemu_memory_usage(size_t *in_use, size_t *peak)
{
    if (in_use)
        *in_use = g_in_use;
    if (peak)
        *peak = g_peak;
}

void cudaemu_memory_reset_peak(void) { g_peak = g_in_use; }

static void report_at_exit(void)
{
    fprintf(stderr,
            "cudaemu: device memory: peak %zu bytes (%.1f MiB); %zu bytes in %zu allocations "
            "still live at exit\n",
            g_peak, (double)g_peak / (1 << 20), g_in_use, g_live_blocks);
    /* each wait stalls the host until the device drains: on a GPU the device then idles
     * while the next kernels are launched */
    fprintf(stderr,
            "cudaemu: host waits for the device: %ld; device-to-host copies: %ld; device "
            "operations: %ld\n",
            cudaemu_host_waits(), cudaemu_device_to_host_copies(), cudaemu_device_ops());
    const char *e = getenv("CUDAEMU_REPORT");
    if (e && strcmp(e, "ops") == 0)
        cudaemu_report_device_ops(stderr);
}

static void account(size_t add, size_t sub)
{
    static int report_checked;
    if (!report_checked) {
        const char *e = getenv("CUDAEMU_REPORT");
        if (e && (strcmp(e, "1") == 0 || strcmp(e, "ops") == 0))
            atexit(report_at_exit);
        report_checked = 1;
    }
    g_in_use = g_in_use + add - sub;
    if (g_in_use > g_peak)
        g_peak = g_in_use;
}

/* ---------------------------------------------------------------- allocation */

static cudaError_t device_alloc(void **out, size_t size)
{
    STICKY_GUARD();
    if (!out)
        return cudaemu_error(cudaErrorInvalidValue);
    *out = NULL;
    if (size == 0)
        return cudaSuccess; /* CUDA hands out NULL for 0 bytes */
    if (size > cudaemu_device_memory_total() - g_in_use)
        return cudaemu_error(cudaErrorMemoryAllocation);
    void *p = NULL;
    if (posix_memalign(&p, DEVICE_ALIGN, size) != 0)
        return cudaemu_error(cudaErrorMemoryAllocation);
    memset(p, POISON, size);
    if (!cudaemu_registry_add(cudaemu_device_registry(), p, size)) {
        free(p);
        return cudaemu_error(cudaErrorMemoryAllocation);
    }
    account(size, 0);
    g_live_blocks++;
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) { return device_alloc(devPtr, size); }

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    cudaemu_check_stream(hStream, "cudaMallocAsync");
    return device_alloc(devPtr, size);
}

/* The live allocation that starts at p, or a finding naming the call. */
static cudaemu_alloc *live_base(void *p, const char *who)
{
    cudaemu_alloc *a = cudaemu_registry_find(cudaemu_device_registry(), p);
    if (!a)
        cudaemu_fail("%s(%p): not a live device allocation (freed twice, or never allocated "
                     "by cudaMalloc/cudaMallocAsync)%s",
                     who, p, cudaemu_freed_note(p));
    if (a->base != (char *)p)
        cudaemu_fail("%s(%p): points %zu bytes into device allocation #%llu (%zu bytes at %p), "
                     "not to its start",
                     who, p, (size_t)((char *)p - a->base), (unsigned long long)a->serial,
                     a->bytes, (void *)a->base);
    return a;
}

/* Forgets a live allocation (the memory itself is released by the caller). */
static void retire(cudaemu_alloc *a, const char *how)
{
    void *base = a->base;
    size_t bytes = a->bytes;
    cudaemu_note_freed(base, bytes, a->serial, how);
    cudaemu_registry_remove(cudaemu_device_registry(), base);
    account(0, bytes);
    g_live_blocks--;
}

cudaError_t cudaFree(void *devPtr)
{
    STICKY_GUARD();
    if (!devPtr)
        return cudaSuccess;
    cudaemu_sync_device();
    cudaemu_alloc *a = live_base(devPtr, "cudaFree");
    retire(a, "cudaFree");
    free(devPtr);
    return cudaSuccess;
}

static void release_block(void *p) { free(p); }

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    STICKY_GUARD();
    cudaemu_check_stream(hStream, "cudaFreeAsync");
    if (!devPtr)
        return cudaSuccess;
    cudaemu_alloc *a = live_base(devPtr, "cudaFreeAsync");
    /* The free writes the whole block as far as other streams are concerned. */
    cudaemu_access whole = { devPtr, a->bytes, 1 };
    cudaemu_enqueue(hStream, "cudaFreeAsync", release_block, devPtr, NULL, &whole, 1);
    retire(a, "cudaFreeAsync");
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    STICKY_GUARD();
    if (!ptr)
        return cudaemu_error(cudaErrorInvalidValue);
    *ptr = NULL;
    void *p = NULL;
    if (posix_memalign(&p, DEVICE_ALIGN, size ? size : 1) != 0)
        return cudaemu_error(cudaErrorMemoryAllocation);
    if (!cudaemu_registry_add(&g_pinned, p, size ? size : 1)) {
        free(p);
        return cudaemu_error(cudaErrorMemoryAllocation);
    }
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr)
{
    STICKY_GUARD();
    if (!ptr)
        return cudaSuccess;
    /* Copies still queued may target the block: finish them first (cudaFreeHost
     * synchronises in CUDA too). */
    cudaemu_sync_device();
    cudaemu_alloc *a = cudaemu_registry_find(&g_pinned, ptr);
    if (!a || a->base != (char *)ptr)
        cudaemu_fail("cudaFreeHost(%p): not a live cudaMallocHost block", ptr);
    cudaemu_registry_remove(&g_pinned, ptr);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total)
        return cudaemu_error(cudaErrorInvalidValue);
    *total = cudaemu_device_memory_total();
    *free_bytes = *total - g_in_use;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- copies and memsets */

static long g_device_to_host; /* for tests: see cudaemu_device_to_host_copies */

long cudaemu_device_to_host_copies(void) { return g_device_to_host; }

static int is_device(const void *p)
{
    return cudaemu_registry_find(cudaemu_device_registry(), p) != NULL;
}

static int is_pinned(const void *p, size_t bytes)
{
    cudaemu_alloc *a = cudaemu_registry_find(&g_pinned, p);
    return a && bytes <= a->bytes - (size_t)((const char *)p - a->base);
}

typedef struct copy_work {
    void *dst;
    const void *src;
    size_t bytes;
    void *staged; /* owned: a copy of pageable source memory made at the call, or NULL */
} copy_work;

static void run_copy(void *ctx)
{
    copy_work *w = ctx;
    memmove(w->dst, w->staged ? w->staged : w->src, w->bytes);
}

static void free_copy(void *ctx)
{
    copy_work *w = ctx;
    free(w->staged);
    free(w);
}

static const char *kind_name(enum cudaMemcpyKind kind)
{
    switch (kind) {
    case cudaMemcpyHostToHost: return "HostToHost";
    case cudaMemcpyHostToDevice: return "HostToDevice";
    case cudaMemcpyDeviceToHost: return "DeviceToHost";
    case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
    default: return "Default";
    }
}

static void check_host_operand(const void *p, const char *who, const char *what,
                               enum cudaMemcpyKind kind)
{
    if (is_device(p))
        cudaemu_fail("%s(%s): %s = %p is device memory, but the kind says host memory", who,
                     kind_name(kind), what, p);
}

static cudaError_t queue_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                              cudaStream_t stream, const char *who)
{
    STICKY_GUARD();
    cudaemu_check_stream(stream, who);
    if (kind == cudaMemcpyDefault) /* unified addressing: the registry tells */
        kind = is_device(src) ? (is_device(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                              : (is_device(dst) ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDeviceToDevice)
        return cudaemu_error(cudaErrorInvalidMemcpyDirection);
    if (count == 0)
        return cudaSuccess;
    int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    g_device_to_host += src_dev && !dst_dev;
    char what[64];
    snprintf(what, sizeof what, "%s(%s)", who, kind_name(kind));
    if (src_dev)
        cudaemu_check_device_range(src, count, what, "src");
    else
        check_host_operand(src, who, "src", kind);
    if (dst_dev)
        cudaemu_check_device_range(dst, count, what, "dst");
    else
        check_host_operand(dst, who, "dst", kind);

    copy_work *w = calloc(1, sizeof *w);
    if (!w)
        return cudaemu_error(cudaErrorMemoryAllocation);
    *w = (copy_work){ dst, src, count, NULL };
    if (!src_dev && !is_pinned(src, count)) {
        w->staged = malloc(count);
        if (!w->staged) {
            free(w);
            return cudaemu_error(cudaErrorMemoryAllocation);
        }
        memcpy(w->staged, src, count);
    }
    cudaemu_access acc[2];
    int n = 0;
    if (src_dev)
        acc[n++] = (cudaemu_access){ src, count, 0 };
    if (dst_dev)
        acc[n++] = (cudaemu_access){ dst, count, 1 };
    cudaemu_enqueue(stream, what, run_copy, w, free_copy, acc, n);
    if (!dst_dev && !is_pinned(dst, count))
        cudaemu_sync_stream(stream); /* pageable destination: return when done */
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return queue_copy(dst, src, count, kind, stream, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    cudaError_t e = queue_copy(dst, src, count, kind, NULL, "cudaMemcpy");
    if (e == cudaSuccess)
        cudaemu_sync_stream(NULL); /* synchronous in every direction */
    return e;
}

typedef struct set_work {
    void *dst;
    int value;
    size_t bytes;
} set_work;

static void run_set(void *ctx)
{
    set_work *w = ctx;
    memset(w->dst, w->value, w->bytes);
}

static cudaError_t queue_set(void *p, int value, size_t count, cudaStream_t stream,
                             const char *who)
{
    STICKY_GUARD();
    cudaemu_check_stream(stream, who);
    if (count == 0)
        return cudaSuccess;
    cudaemu_check_device_range(p, count, who, "devPtr");
    set_work *w = malloc(sizeof *w);
    if (!w)
        return cudaemu_error(cudaErrorMemoryAllocation);
    *w = (set_work){ p, value, count };
    cudaemu_access acc = { p, count, 1 };
    cudaemu_enqueue(stream, who, run_set, w, free, &acc, 1);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return queue_set(devPtr, value, count, stream, "cudaMemsetAsync");
}

/* Asynchronous with respect to the host for device memory, as in CUDA: queued on the
 * legacy default stream. */
cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return queue_set(devPtr, value, count, NULL, "cudaMemset");
}
