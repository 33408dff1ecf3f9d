/* Counter-based random numbers.
 *
 * Every random value is a pure function of (seed, stream, index): no generator
 * state advances, so any rank can produce element i of a tensor, or position k of a
 * permutation, without producing the ones before it. That is what keeps random
 * initialisation and data order identical for any number of ranks.
 */
#ifndef FT_UTIL_RNG_H
#define FT_UTIL_RNG_H

#include <stddef.h>
#include <stdint.h>

/* What is inline here also compiles for the device (the CUDA backend's initial values,
 * the dropout mask), so that both sides hash with the same code. */
#ifdef __CUDACC__
#define FT_RNG_FN static inline __host__ __device__
#else
#define FT_RNG_FN static inline
#endif

/* SplitMix64 finaliser: a bijective 64-bit mix with good avalanche. */
FT_RNG_FN uint64_t ft_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The key of (seed, stream): what every value of the stream shares, so that code making
 * many of them (the normal fills) computes it once. */
FT_RNG_FN uint64_t ft_rng_key(uint64_t seed, uint64_t stream)
{
    return ft_mix64(seed ^ ft_mix64(stream));
}

/* The bits of value index of the stream whose key is key. */
FT_RNG_FN uint64_t ft_rng_key_u64(uint64_t key, uint64_t index)
{
    return ft_mix64(key + index);
}

FT_RNG_FN uint64_t ft_rng_u64(uint64_t seed, uint64_t stream, uint64_t index)
{
    return ft_rng_key_u64(ft_rng_key(seed, stream), index);
}

/* Uniform in (0, 1): 53 random bits, never 0 (safe for log). */
FT_RNG_FN double ft_rng_key_uniform(uint64_t key, uint64_t index)
{
    return ((double)(ft_rng_key_u64(key, index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

FT_RNG_FN double ft_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return ft_rng_key_uniform(ft_rng_key(seed, stream), index);
}

/* The stream of a named tensor: FNV-1a 64 of the name (so a tensor's values depend on
 * its name, not on where it sits in a unit). */
static inline uint64_t ft_rng_name_stream(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

/* Standard normal by Box-Muller from two uniforms of the same counter. */
double ft_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* perm[0..n) = a permutation of 0..n-1 (Fisher-Yates driven by the counter RNG). */
void ft_rng_permutation(uint64_t seed, uint64_t stream, uint32_t *perm, size_t n);

#endif
