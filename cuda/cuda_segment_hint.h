/* The host copy of the segment ids the model last uploaded (host C, no CUDA calls).
 *
 * cuDNN's ragged batches need the document table on the host, but the attention ops
 * receive the segment ids as a device pointer. Reading them back costs a device->host
 * copy and a stream synchronisation per call (forward, backward and the checkpointed
 * recompute of every layer). Instead the model, which built the ids on the host just
 * before uploading them, hands that host copy over once per micro-batch (the vtable's
 * segment_hint); attention calls with the same device pointer and shape read it here.
 *
 * Staleness. The model re-uploads each micro-batch into the same device buffer, so the
 * pointer alone cannot tell which ids a table was made of. A hint is therefore valid
 * only until the backend sees anything else write that buffer (upload, copy, zero, free:
 * ft_segment_hint_written), and each hint bumps a generation that derived tables are
 * keyed on. A kernel that wrote segment ids would bypass this; no op does. */
#ifndef FT_CUDA_SEGMENT_HINT_H
#define FT_CUDA_SEGMENT_HINT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

typedef struct ft_segment_hint {
    const int32_t *device; /* the device buffer described; NULL: no valid hint */
    ft_attn_shape shape;   /* batch and seq_len size the ids; the rest keys derived tables */
    unsigned long generation; /* bumped by every hint; 0 is never a valid generation */
    int32_t *host;         /* owned copy of the ids, [batch * seq_len] */
    size_t cap;            /* ints allocated at host */
} ft_segment_hint;

/* Records a copy of host_ids ([s.batch * s.seq_len]) as the content of device_ids.
 * -1 (and no valid hint) when host memory runs out: callers then take the slow path. */
int ft_segment_hint_set(ft_segment_hint *h, const int32_t *device_ids, const int32_t *host_ids,
                        ft_attn_shape s);
/* Forgets the hint if [p, p + bytes) overlaps the hinted ids (bytes 0: p itself, a free). */
void ft_segment_hint_written(ft_segment_hint *h, const void *p, size_t bytes);
/* The host ids of device_ids for an attention call of shape s, or NULL when no valid hint
 * covers that pointer and shape (the window plays no part); *generation identifies them. */
const int32_t *ft_segment_hint_lookup(const ft_segment_hint *h, const int32_t *device_ids,
                                      ft_attn_shape s, unsigned long *generation);
void ft_segment_hint_release(ft_segment_hint *h);

#endif
