#include "train/data_order.h"

#include <stdlib.h>

#include "util/rng.h"

#define FT_STREAM_DATA_ORDER 0x64617461ull /* "data" */

int ft_data_order_init(ft_data_order *o, int64_t rows, uint64_t seed, bool shuffle, ft_error *err)
{
    o->rows = rows;
    o->seed = seed;
    o->shuffle = shuffle;
    o->epoch = -1;
    o->perm = NULL;
    if (shuffle && rows > 0xffffffffll)
        return ft_fail(err, "dataset has %lld rows; shuffling supports up to 2^32",
                       (long long)rows);
    if (shuffle && !(o->perm = malloc((size_t)rows * sizeof *o->perm)))
        return ft_fail(err, "out of host memory for the data order (%lld rows)", (long long)rows);
    return 0;
}

void ft_data_order_free(ft_data_order *o)
{
    free(o->perm);
    o->perm = NULL;
}

int64_t ft_data_order_row(ft_data_order *o, int64_t sample)
{
    const int64_t epoch = sample / o->rows, idx = sample % o->rows;
    if (!o->shuffle)
        return idx;
    if (epoch != o->epoch) {
        ft_rng_permutation(o->seed, FT_STREAM_DATA_ORDER + (uint64_t)epoch, o->perm,
                           (size_t)o->rows);
        o->epoch = epoch;
    }
    return o->perm[idx];
}
