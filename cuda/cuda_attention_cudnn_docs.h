/* Packed documents as a ragged batch for cuDNN (host C, no CUDA calls): from a call's
 * segment ids, each row's runs of equal ids become documents, described by four int32
 * tables uploaded as one block (cuda_attention_cudnn.c). */
#ifndef FT_CUDA_ATTENTION_CUDNN_DOCS_H
#define FT_CUDA_ATTENTION_CUDNN_DOCS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

enum ft_sdpa_doc_table {
    FT_SDPA_DOC_OFF_Q,  /* [docs+1] element offset of each document in q/out/dq/dout */
    FT_SDPA_DOC_OFF_KV, /* [docs+1] ... in k/v/dk/dv */
    FT_SDPA_DOC_LEN,    /* [docs] tokens of each document (0: padding) */
    FT_SDPA_DOC_TOKEN,  /* [docs] its first token, batch-major (0 for padding) */
    FT_SDPA_DOC_TABLES
};

typedef struct ft_sdpa_docs {
    int count; /* documents found */
    int docs;  /* count rounded up to a power of two: empty documents pad it */
    int rows;  /* the longest document rounded up to a power of two, at most seq_len */
    int slot;  /* ints from one table to the next (docs + 1 rounded up to 64: 256 bytes) */
    int32_t *host; /* FT_SDPA_DOC_TABLES tables, slot ints apart (owned) */
    size_t cap;
    int32_t *scratch; /* one row's document ids (owned) */
    size_t scratch_cap;
} ft_sdpa_docs;

/* Fills d from seg (host, [batch * seq_len]). Returns 0; 1 where a row is not made of
 * contiguous documents (an id reappears after another: cuDNN's ragged batch cannot say
 * it); -1 when host memory runs out. Offsets must fit int32 (the caller checks). */
int ft_sdpa_docs_from_ids(ft_sdpa_docs *d, const int32_t *seg, ft_attn_shape s);
/* Table t inside a block laid out like d->host (the host copy or its device copy). */
static inline int32_t *ft_sdpa_docs_table(const ft_sdpa_docs *d, int32_t *block, int t)
{
    return block + (size_t)t * d->slot;
}
static inline size_t ft_sdpa_docs_bytes(const ft_sdpa_docs *d)
{
    return (size_t)FT_SDPA_DOC_TABLES * d->slot * sizeof(int32_t);
}
void ft_sdpa_docs_release(ft_sdpa_docs *d);

#endif
