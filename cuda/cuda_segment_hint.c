/* The host copy of the last uploaded segment ids (cuda_segment_hint.h). */
#include "cuda_segment_hint.h"

#include <stdlib.h>
#include <string.h>

static size_t ids_of(ft_attn_shape s) { return (size_t)s.batch * (size_t)s.seq_len; }

int ft_segment_hint_set(ft_segment_hint *h, const int32_t *device_ids, const int32_t *host_ids,
                        ft_attn_shape s)
{
    h->device = NULL;
    h->generation++;
    if (h->generation == 0) /* wrapped: 0 means "none" to the tables keyed on it */
        h->generation = 1;
    size_t n = ids_of(s);
    if (!device_ids || !host_ids || s.batch <= 0 || s.seq_len <= 0)
        return 0;
    if (h->cap < n) {
        free(h->host);
        h->host = malloc(n * sizeof *h->host);
        h->cap = h->host ? n : 0;
        if (!h->host)
            return -1;
    }
    memcpy(h->host, host_ids, n * sizeof *h->host);
    h->device = device_ids;
    h->shape = s;
    return 0;
}

void ft_segment_hint_written(ft_segment_hint *h, const void *p, size_t bytes)
{
    if (!h->device || !p)
        return;
    uintptr_t a = (uintptr_t)p, b = a + (bytes ? bytes : 1);
    uintptr_t lo = (uintptr_t)h->device, hi = lo + ids_of(h->shape) * sizeof(int32_t);
    if (a < hi && lo < b)
        h->device = NULL;
}

const int32_t *ft_segment_hint_lookup(const ft_segment_hint *h, const int32_t *device_ids,
                                      ft_attn_shape s, unsigned long *generation)
{
    const ft_attn_shape k = h->shape;
    if (!h->device || h->device != device_ids || k.batch != s.batch || k.seq_len != s.seq_len)
        return NULL;
    *generation = h->generation;
    return h->host;
}

void ft_segment_hint_release(ft_segment_hint *h)
{
    free(h->host);
    memset(h, 0, sizeof *h);
}
