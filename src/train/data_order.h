/* Which dataset row is the k-th sample of training, for any k.
 *
 * Samples are numbered globally: step s uses samples [s*G, (s+1)*G) with G the
 * global batch. Sample k is row perm_e[k mod R] with epoch e = k / R and perm_e a
 * permutation drawn from (seed, e) (the identity without shuffling). Rank r of P
 * takes samples s*G + r*G/P ... of each step, in micro-batches. The rows of a step
 * are therefore the same set for every P, which is what makes the loss independent
 * of the number of ranks.
 */
#ifndef FT_TRAIN_DATA_ORDER_H
#define FT_TRAIN_DATA_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

typedef struct ft_data_order {
    int64_t rows;
    uint64_t seed;
    bool shuffle;
    int64_t epoch;  /* epoch of the cached permutation, -1 for none */
    uint32_t *perm; /* [rows] */
} ft_data_order;

int ft_data_order_init(ft_data_order *o, int64_t rows, uint64_t seed, bool shuffle, ft_error *err);
void ft_data_order_free(ft_data_order *o);
int64_t ft_data_order_row(ft_data_order *o, int64_t sample);

#endif
