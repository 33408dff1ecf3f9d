/* Page-locked host memory and the copies that do not wait (backend.h: host_alloc,
 * host_free, upload_async, download_async), for the offloaded optimizer's transfers
 * (src/shard/engine_offload.c).
 *
 * Why page-locked: a copy from or to pageable memory goes through the driver's own
 * staging buffer (the copy engine reaches only locked pages), at a fraction of the bus's
 * speed, and a download into pageable memory returns only once it is done. From and into
 * cudaMallocHost memory the copy engine moves the bytes itself while the host computes:
 * the host's AdamW of one unit runs while the next unit's gradient comes down and the
 * last unit's bits go up. */
#include <string.h>

#include "cuda_internal.h"
#include "cuda_state.h"

void *ft_cuda_host_alloc(ft_backend *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of locked memory: the caller falls back */
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

void ft_cuda_host_free(ft_backend *be, void *p)
{
    (void)be;
    if (p)
        ft_cuda_check(cudaFreeHost(p), "cudaFreeHost");
}

void ft_cuda_upload_async(ft_backend *be, void *dst, const void *src_host, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0)
        return;
    ft_segment_hint_written(&st->segment_hint, dst, bytes);
    ft_cuda_check(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, st->stream),
                  "upload (asynchronous)");
}

void ft_cuda_download_async(ft_backend *be, void *dst_host, const void *src, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0)
        return;
    ft_cuda_check(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, st->stream),
                  "download (asynchronous)");
}
