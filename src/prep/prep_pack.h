/* Which examples go to which file, in which order, and where each lands in the packed rows.
 * Everything here is a pure function of the example lengths and the options, so every rank
 * computes the same plan from the gathered lengths and the output does not depend on the
 * number of ranks.
 */
#ifndef FT_PREP_PACK_H
#define FT_PREP_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

typedef enum prep_pack_mode {
    PREP_PACK_GREEDY, /* in order: a document goes to the current row, or opens the next one */
    PREP_PACK_FFD,    /* first-fit decreasing: longest first, into the first row with room */
    PREP_PACK_NONE,   /* one document per row */
} prep_pack_mode;

typedef struct prep_plan {
    int64_t n;         /* documents */
    int64_t rows;
    int64_t *row;      /* [n] row of document k (k = position in the list packed) */
    int32_t *offset;   /* [n] its first column */
    int32_t *seg;      /* [n] its segment id in the row (0, 1, ... by column) */
    int32_t *row_docs; /* [rows] documents in the row = segment id of the row's padding */
    int32_t *row_used; /* [rows] columns taken by documents; the rest is padding */
} prep_plan;

/* len[k] (1 <= len[k] <= width) are the lengths of the documents in list order. */
int prep_pack(const int32_t *len, int64_t n, int width, prep_pack_mode mode, prep_plan *plan,
              ft_error *err);
void prep_plan_free(prep_plan *plan);

/* Splits examples 0..n-1 into eval (round(eval_fraction*n) of them, at least one when the
 * fraction is positive and n > 1, chosen by a permutation drawn from seed; kept in input order)
 * and train (the rest, in input order, or permuted with the seed when shuffle). The lists are
 * malloc'd (the caller frees them). */
int prep_split(int64_t n, double eval_fraction, uint64_t seed, bool shuffle, int64_t **train,
               int64_t *n_train, int64_t **eval, int64_t *n_eval, ft_error *err);

#endif
