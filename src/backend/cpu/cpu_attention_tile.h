/* Tile kernels of the CPU flash attention (cpu_attention.c): the work done on one
 * FT_ATTN_TILE x FT_ATTN_TILE block of scores, built once per instruction set
 * (cpu_attention_tile.c) and picked at run time by the backend's ISA.
 * Score tiles are T x T floats with leading dimension T = FT_ATTN_TILE; the
 * last tile of a sequence may use fewer rows or columns. */
#ifndef FT_BACKEND_CPU_ATTENTION_TILE_H
#define FT_BACKEND_CPU_ATTENTION_TILE_H

#include <stddef.h>

#include "backend/cpu/cpu_internal.h"

/* Query rows per block and keys per tile. 64 x 64 scores = 16 KiB: the score,
 * probability and dP tiles of one task stay in L1/L2 next to the Q/K/V tiles. */
#define FT_ATTN_TILE 64

typedef struct ft_attn_tile_kernels {
    /* c[m x n] += A b with A(i, p) = a[i * a_row + p * a_col] (i < m, p < k) and
     * b, c row-major with leading dimensions ldb, ldc. The strides let a tile be
     * read in place from the [tokens, heads * head_dim] tensors, or transposed
     * ((a_row, a_col) = (1, ld)) without copying it. */
    void (*gemm_acc)(float *c, int ldc, const float *a, size_t a_row, size_t a_col,
                     const float *b, size_t ldb, int m, int n, int k);
    /* One step of the online softmax on a transposed score tile st [kn x T]
     * (row j: key j; column i: query i; ld T):
     *   m'_i = max(m_i, max_j st_ji),  alpha_i = exp(m_i - m'_i),
     *   st_ji := exp(st_ji - m'_i),    l_i := alpha_i l_i + sum_j st_ji,
     *   acc_i := alpha_i acc_i  (acc [T x hd]),  m_i := m'_i.
     * Masked scores are -inf and give 0; a query with nothing visible yet keeps
     * m = -inf, l = 0. Vectorised across queries: the reductions over keys are
     * elementwise max/add of rows. */
    void (*online_softmax_t)(float *st, int kn, float *m, float *l, float *acc, int hd);
    /* Probabilities recomputed in the backward, p = exp(s - lse_i), on s [rows x
     * cols] (ld T) with query i = row i (probs_rows) or = column i (probs_cols).
     * lse_eff is lse with -inf replaced by +inf, so that masked scores (-inf) and
     * rows without visible keys both give exactly 0, never NaN. */
    void (*probs_rows)(float *s, int rows, int cols, const float *lse_eff);
    void (*probs_cols)(float *s, int rows, const float *lse_eff);
    /* The softmax backward, dp := p (dp - D_i), D_i = sum_d dO_id O_id, with query
     * i = row i (dscores_rows) or = column i (dscores_cols); ld T. */
    void (*dscores_rows)(float *dp, const float *p, int rows, int cols, const float *D);
    void (*dscores_cols)(float *dp, const float *p, int rows, const float *D);
} ft_attn_tile_kernels;

const ft_attn_tile_kernels *ft_cpu_attn_tile_kernels(ft_cpu_isa isa);

#endif
