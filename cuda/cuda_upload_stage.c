/* Pinned staging for small uploads (cuda_upload_stage.h). */
#include "cuda_upload_stage.h"

#include <string.h>

#define STAGE_ALIGN 256 /* each copy's source starts on its own 256 bytes */

cudaError_t ft_upload_stage_init(ft_upload_stage *s)
{
    memset(s, 0, sizeof *s);
    cudaError_t e = cudaMallocHost((void **)&s->host, FT_UPLOAD_STAGE_BYTES);
    if (e != cudaSuccess) {
        s->host = NULL;
        return e;
    }
    e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        (void)cudaFreeHost(s->host);
        s->host = NULL;
    }
    return e;
}

void ft_upload_stage_release(ft_upload_stage *s)
{
    if (!s->host)
        return;
    if (s->pending)
        (void)cudaEventSynchronize(s->done);
    (void)cudaEventDestroy(s->done);
    (void)cudaFreeHost(s->host);
    memset(s, 0, sizeof *s);
}

int ft_upload_stage_copy(ft_upload_stage *s, void *dst, const void *src_host, size_t bytes,
                         cudaStream_t st)
{
    if (!s->host || bytes > FT_UPLOAD_STAGE_MAX)
        return 0;
    const size_t span = (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    cudaError_t e;
    if (s->used + span > FT_UPLOAD_STAGE_BYTES) { /* full: reuse from the start */
        if (s->pending && (e = cudaEventSynchronize(s->done)) != cudaSuccess)
            return -(int)e;
        s->pending = 0;
        s->used = 0;
    }
    char *slot = s->host + s->used;
    memcpy(slot, src_host, bytes);
    if ((e = cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, st)) != cudaSuccess ||
        (e = cudaEventRecord(s->done, st)) != cudaSuccess)
        return -(int)e;
    s->pending = 1;
    s->used += span;
    return 1;
}
