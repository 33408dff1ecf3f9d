/* Small uploads without a host wait: the backend's upload copies the caller's bytes into a
 * ring of pinned host memory and queues the device copy from there, so the caller may
 * reuse its buffer at once and the host need not wait for the copy (a training step's
 * batch, its positions, documents and packed rows: nine uploads of a few KiB that each
 * drained the GPU). Larger uploads (the weights at start-up) keep the plain copy and its
 * wait. The ring is reused from its start when full, after the last copy from it ran. */
#ifndef FT_CUDA_UPLOAD_STAGE_H
#define FT_CUDA_UPLOAD_STAGE_H

#include <cuda_runtime.h>
#include <stddef.h>

#define FT_UPLOAD_STAGE_BYTES ((size_t)4 << 20) /* the ring */
#define FT_UPLOAD_STAGE_MAX ((size_t)1 << 20)   /* the largest upload it takes */

typedef struct ft_upload_stage {
    char *host;       /* pinned, FT_UPLOAD_STAGE_BYTES; NULL: not set up */
    size_t used;      /* bytes handed out since the ring was last reused from its start */
    cudaEvent_t done; /* recorded after the latest copy from the ring */
    int pending;      /* done has been recorded since the last wait on it */
} ft_upload_stage;

cudaError_t ft_upload_stage_init(ft_upload_stage *s);
/* Waits for the last copy from the ring, then frees it (safe on a zeroed struct). */
void ft_upload_stage_release(ft_upload_stage *s);
/* Queues dst <- src_host (bytes) on st through the ring when bytes <= FT_UPLOAD_STAGE_MAX:
 * 1 (src_host is free to reuse on return), or a negative cudaError on failure; 0 when the
 * upload is too large for it (the caller copies directly). */
int ft_upload_stage_copy(ft_upload_stage *s, void *dst, const void *src_host, size_t bytes,
                         cudaStream_t st);

#endif
