/* The dropout mask rule, once, for host and device code (the CPU's dropout op, the
 * CUDA kernel and the tests read it, so the two backends cannot drift apart).
 *
 * Element (row, col) is kept iff the top 32 bits of
 *     h = mix(mix(seed ^ mix(row)) + col)          (mix: util/rng.h's ft_mix64)
 * are >= threshold, threshold = round(p 2^32): a pure function of (seed, row, col),
 * the value util/rng.h's ft_rng_u64(seed, row, col) gives. Nothing is stored and no
 * generator state advances, so the backward recomputes the forward's mask from the
 * same seed, and a row's mask is the same whichever thread, block or rank computes
 * it: callers number rows globally (row0 + local row) so that splitting the rows
 * over ranks or micro-batches does not change any element's fate.
 *
 * Kept elements are scaled by 1 / (1 - p) (inverted dropout, as torch.nn.Dropout),
 * so the expectation of the output is the input and evaluation needs no rescaling.
 * The keep probability is 1 - threshold / 2^32, within 2^-33 of 1 - p. */
#ifndef FT_BACKEND_DROPOUT_MASK_H
#define FT_BACKEND_DROPOUT_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/rng.h"

#ifdef __CUDACC__
#define FT_DROPOUT_FN static inline __host__ __device__
#else
#define FT_DROPOUT_FN static inline
#endif

typedef struct ft_dropout_mask {
    uint64_t seed;      /* which mask (callers derive it per use: run, layer, site) */
    uint64_t row0;      /* global number of the tensor's first row */
    uint32_t threshold; /* dropped iff the hash's top 32 bits < threshold */
    float scale;        /* kept values are multiplied by it: 1 / (1 - p) */
} ft_dropout_mask;

/* The part of the hash shared by a row: mix(seed ^ mix(row0 + i)) of local row i. */
FT_DROPOUT_FN uint64_t ft_dropout_row_key(const ft_dropout_mask *m, uint64_t i)
{
    return ft_rng_key(m->seed, m->row0 + i);
}

/* Whether column col of the row with key row_key is kept. */
FT_DROPOUT_FN bool ft_dropout_keep(const ft_dropout_mask *m, uint64_t row_key, uint64_t col)
{
    return (uint32_t)(ft_rng_key_u64(row_key, col) >> 32) >= m->threshold;
}

/* The mask of drop probability p (0 <= p < 1) for seed, rows numbered from row0. */
static inline ft_dropout_mask ft_dropout_mask_make(double p, uint64_t seed, uint64_t row0)
{
    double t = p * 4294967296.0 + 0.5;
    ft_dropout_mask m = { seed, row0, t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t,
                          (float)(1.0 / (1.0 - p)) };
    return m;
}

#endif
