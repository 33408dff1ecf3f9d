/* The CPU execution harness for CUDA: the runtime API entry points for streams, events,
 * synchronisation and memory pools. The machinery is in cudaemu_stream.c; device
 * properties in cudaemu_device.c; memory and copies in cudaemu_memory.c; errors in
 * cudaemu_errors.c.
 *
 * Queries (cudaStreamQuery, cudaEventQuery) on pending work answer cudaErrorNotReady and
 * run that work, so a polling loop ends on its next query. Event timing is not modelled:
 * cudaEventElapsedTime reports 0 ms between two completed, timed events. */
#include "cudaemu_host.h"

#include <stdint.h>

/* ---------------------------------------------------------------- streams */

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_stream_create(pStream, cudaStreamDefault));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_stream_create(pStream, flags));
}

/* Priorities order nothing in the harness (it runs what a dependency forces, in stream
 * order); the range is a real device's, [-5, 0] as on sm_80/sm_90, and a priority
 * outside it is clamped as CUDA does. */
#define CUDAEMU_PRIORITY_GREATEST (-5)
cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    STICKY_GUARD();
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = CUDAEMU_PRIORITY_GREATEST;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    STICKY_GUARD();
    (void)priority;
    return cudaemu_error(cudaemu_stream_create(pStream, flags));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    return cudaemu_error(cudaemu_stream_destroy(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    STICKY_GUARD();
    cudaemu_sync_stream(stream);
    return cudaemu_sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    STICKY_GUARD();
    if (cudaemu_stream_pending(stream)) {
        cudaemu_force_stream(stream);
        return cudaErrorNotReady; /* not an error: not recorded as one */
    }
    cudaemu_sync_stream(stream); /* "done" orders the host after the stream */
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    STICKY_GUARD();
    if (flags != 0 && flags != cudaEventWaitDefault)
        return cudaemu_error(cudaErrorInvalidValue);
    return cudaemu_error(cudaemu_stream_wait_event(stream, event));
}

cudaError_t cudaDeviceSynchronize(void)
{
    STICKY_GUARD();
    cudaemu_sync_device();
    return cudaemu_sticky_error();
}

/* ---------------------------------------------------------------- events */

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_event_create(event, cudaEventDefault));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_event_create(event, flags));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    return cudaemu_error(cudaemu_event_destroy(event));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_event_record(event, stream));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    STICKY_GUARD();
    return cudaemu_error(cudaemu_event_sync(event));
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    STICKY_GUARD();
    if (cudaemu_event_pending(event)) {
        (void)cudaemu_event_sync(event);
        return cudaErrorNotReady;
    }
    return cudaemu_error(cudaemu_event_sync(event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    STICKY_GUARD();
    if (!ms)
        return cudaemu_error(cudaErrorInvalidValue);
    if (cudaemu_event_pending(start) || cudaemu_event_pending(end))
        return cudaErrorNotReady;
    *ms = 0.0f; /* no model of device time */
    return cudaSuccess;
}

/* ---------------------------------------------------------------- memory pools */

/* One default pool per device. The harness allocates every block from the host heap
 * whatever the pool says; the attributes are stored so they read back as set, and the
 * usage attributes report the harness's accounting. */
#define MAX_POOLS 64
struct CUmemPoolHandle_st {
    int device;
    uint64_t release_threshold;
    int reuse_follow_event, reuse_opportunistic, reuse_internal;
};
static struct CUmemPoolHandle_st g_pools[MAX_POOLS];

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    int count = 0;
    if (!memPool)
        return cudaemu_error(cudaErrorInvalidValue);
    (void)cudaGetDeviceCount(&count);
    if (device < 0 || device >= count || device >= MAX_POOLS)
        return cudaemu_error(cudaErrorInvalidDevice);
    g_pools[device].device = device;
    *memPool = &g_pools[device];
    return cudaSuccess;
}

static cudaError_t pool_attr(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value, int set)
{
    if (!pool || pool < &g_pools[0] || pool >= &g_pools[MAX_POOLS] || !value)
        return cudaemu_error(cudaErrorInvalidValue);
    int *flag = NULL;
    size_t in_use = 0, peak = 0;
    cudaemu_memory_usage(&in_use, &peak);
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
        if (set)
            pool->release_threshold = *(uint64_t *)value;
        else
            *(uint64_t *)value = pool->release_threshold;
        return cudaSuccess;
    case cudaMemPoolReuseFollowEventDependencies: flag = &pool->reuse_follow_event; break;
    case cudaMemPoolReuseAllowOpportunistic: flag = &pool->reuse_opportunistic; break;
    case cudaMemPoolReuseAllowInternalDependencies: flag = &pool->reuse_internal; break;
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent:
        if (set)
            return cudaemu_error(cudaErrorInvalidValue);
        *(uint64_t *)value = in_use;
        return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
    case cudaMemPoolAttrUsedMemHigh:
        if (set) { /* CUDA allows only resetting the high-water mark, with 0 */
            if (*(uint64_t *)value != 0)
                return cudaemu_error(cudaErrorInvalidValue);
            cudaemu_memory_reset_peak();
        } else {
            *(uint64_t *)value = peak;
        }
        return cudaSuccess;
    default:
        return cudaemu_error(cudaErrorInvalidValue);
    }
    if (set)
        *flag = *(int *)value;
    else
        *(int *)value = *flag;
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    STICKY_GUARD();
    return pool_attr(memPool, attr, value, 1);
}

/* The harness's pool caches nothing (a freed block is returned at once), so a trim only
 * checks its pool and is counted (cudaemu_pool_trims). */
static long g_pool_trims;

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    STICKY_GUARD();
    (void)minBytesToKeep;
    if (!memPool || memPool < &g_pools[0] || memPool >= &g_pools[MAX_POOLS])
        return cudaemu_error(cudaErrorInvalidValue);
    g_pool_trims++;
    return cudaSuccess;
}

long cudaemu_pool_trims(void) { return g_pool_trims; }

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    STICKY_GUARD();
    return pool_attr(memPool, attr, value, 0);
}
