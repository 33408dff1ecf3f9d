/* Token embedding lookup and its backward (scatter-add into the table).
 * The backward must be deterministic: two tokens with the same id add into the
 * same table row. Instead of atomics, the embedding dimension is split into
 * column blocks, one per task; a task walks all tokens in order and adds its
 * columns. Every table element then receives its additions in token order,
 * whatever the number of threads. */
#include "backend/cpu/cpu_internal.h"

#include <string.h>

void ft_cpu_embedding_fwd(ft_backend *be, float *out, const float *table, const int32_t *ids,
                          int tokens, int dim)
{
    size_t work = (size_t)tokens * (size_t)dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int t = 0; t < tokens; t++)
        memcpy(out + (size_t)t * dim, table + (size_t)ids[t] * dim, (size_t)dim * sizeof(float));
}

/* 64 floats = 4 cache lines per row and block: wide enough for full-line
 * accesses, narrow enough to give 64 blocks to 64 threads at dim = 4096. */
#define EMBEDDING_COL_BLOCK 64

void ft_cpu_embedding_bwd(ft_backend *be, float *dtable, const float *dout, const int32_t *ids,
                          int tokens, int dim)
{
    size_t work = (size_t)tokens * (size_t)dim;
    int blocks = (dim + EMBEDDING_COL_BLOCK - 1) / EMBEDDING_COL_BLOCK;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int cb = 0; cb < blocks; cb++) {
        int lo = cb * EMBEDDING_COL_BLOCK;
        int hi = lo + EMBEDDING_COL_BLOCK < dim ? lo + EMBEDDING_COL_BLOCK : dim;
        for (int t = 0; t < tokens; t++) {
            float *dst = dtable + (size_t)ids[t] * dim;
            const float *src = dout + (size_t)t * dim;
#pragma omp simd
            for (int j = lo; j < hi; j++)
                dst[j] += src[j];
        }
    }
}
