#include "util/rng.h"

#include <math.h>

double ft_rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    double u1 = ft_rng_uniform(seed, stream, 2 * index);
    double u2 = ft_rng_uniform(seed, stream, 2 * index + 1);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void ft_rng_permutation(uint64_t seed, uint64_t stream, uint32_t *perm, size_t n)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        /* j uniform in [0, i): multiply-shift keeps the bias below 2^-32 for n < 2^32 */
        uint64_t r = ft_rng_u64(seed, stream, i) >> 32;
        size_t j = (size_t)((r * (uint64_t)i) >> 32);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
