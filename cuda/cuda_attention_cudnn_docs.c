/* Segment ids to the document tables of a ragged cuDNN batch (cuda_attention_cudnn_docs.h).
 *
 * Why powers of two: the graph's batch dimension is the document count and its row
 * dimension the longest document; both are part of the plan, and a plan takes cuDNN tens
 * to hundreds of milliseconds to build. Rounded up, a few plans serve every batch of a
 * run; the cost is empty documents (no rows) and statistics rows that no token uses. */
#include "cuda_attention_cudnn_docs.h"

#include <stdlib.h>

static int pow2_at_least(int n)
{
    int p = 1;
    while (p < n)
        p *= 2;
    return p;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int grow(int32_t **p, size_t *cap, size_t n)
{
    if (*cap >= n)
        return 0;
    free(*p);
    *p = malloc(n * sizeof **p);
    *cap = *p ? n : 0;
    return *p ? 0 : -1;
}

/* Documents of one row; 1 if an id comes back after another id. */
static int row_documents(ft_sdpa_docs *d, const int32_t *r, int seq, int *count, int *longest)
{
    int n = 0;
    for (int t = 0, start = 0; t < seq; t++)
        if (t + 1 == seq || r[t + 1] != r[t]) {
            d->scratch[n++] = r[t];
            *longest = t + 1 - start > *longest ? t + 1 - start : *longest;
            start = t + 1;
        }
    qsort(d->scratch, (size_t)n, sizeof *d->scratch, cmp_i32);
    for (int i = 1; i < n; i++)
        if (d->scratch[i] == d->scratch[i - 1])
            return 1;
    *count += n;
    return 0;
}

int ft_sdpa_docs_from_ids(ft_sdpa_docs *d, const int32_t *seg, ft_attn_shape s)
{
    if (grow(&d->scratch, &d->scratch_cap, (size_t)s.seq_len) != 0)
        return -1;
    int count = 0, longest = 0;
    for (int b = 0; b < s.batch; b++)
        if (row_documents(d, seg + (size_t)b * s.seq_len, s.seq_len, &count, &longest) != 0)
            return 1;
    d->count = count;
    d->docs = pow2_at_least(count);
    d->rows = pow2_at_least(longest);
    if (d->rows > s.seq_len)
        d->rows = s.seq_len;
    d->slot = (d->docs + 1 + 63) / 64 * 64;
    if (grow(&d->host, &d->cap, (size_t)FT_SDPA_DOC_TABLES * d->slot) != 0)
        return -1;
    int32_t *off_q = ft_sdpa_docs_table(d, d->host, FT_SDPA_DOC_OFF_Q);
    int32_t *off_kv = ft_sdpa_docs_table(d, d->host, FT_SDPA_DOC_OFF_KV);
    int32_t *len = ft_sdpa_docs_table(d, d->host, FT_SDPA_DOC_LEN);
    int32_t *token = ft_sdpa_docs_table(d, d->host, FT_SDPA_DOC_TOKEN);
    const int64_t q_row = (int64_t)s.n_heads * s.head_dim, kv_row = (int64_t)s.n_kv_heads * s.head_dim;
    const int64_t tokens = (int64_t)s.batch * s.seq_len;
    int i = 0;
    for (int b = 0; b < s.batch; b++) {
        const int32_t *r = seg + (size_t)b * s.seq_len;
        for (int t = 0, start = 0; t < s.seq_len; t++)
            if (t + 1 == s.seq_len || r[t + 1] != r[t]) {
                int64_t first = (int64_t)b * s.seq_len + start;
                token[i] = (int32_t)first;
                len[i] = t + 1 - start;
                off_q[i] = (int32_t)(first * q_row);
                off_kv[i] = (int32_t)(first * kv_row);
                i++;
                start = t + 1;
            }
    }
    /* padding documents: empty, placed at the end of the buffers */
    for (; i <= d->docs; i++) {
        off_q[i] = (int32_t)(tokens * q_row);
        off_kv[i] = (int32_t)(tokens * kv_row);
        if (i < d->docs)
            len[i] = token[i] = 0;
    }
    return 0;
}

void ft_sdpa_docs_release(ft_sdpa_docs *d)
{
    free(d->host);
    free(d->scratch);
    d->host = d->scratch = NULL;
    d->cap = d->scratch_cap = 0;
}
