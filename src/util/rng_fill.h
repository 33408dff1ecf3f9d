/* Many normals at once, bitwise equal to ft_rng_normal one by one (util/rng.h).
 *
 * ft_rng_normal spends most of its ~50 ns in libm's cos and log. Here each value is
 * first computed with short polynomials (errors below 1e-15, far inside the margin
 * below) and rounded to float; only a value whose double lies within 1e-12 (relative,
 * plus 1e-12 std absolute) of the midpoint between two floats could round differently
 * from libm's, and that one value (about 1 in 5,000) is recomputed with
 * ft_rng_normal. So the floats are exactly those of the serial reference, which
 * resume, tests and every sharding depend on, at a fraction of its cost.
 */
#ifndef FT_UTIL_RNG_FILL_H
#define FT_UTIL_RNG_FILL_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = (float)(std * ft_rng_normal(seed, stream, first + i)) for i < n. One thread;
 * callers split larger ranges between threads. */
void ft_rng_normal_fill_f32(uint64_t seed, uint64_t stream, uint64_t first, size_t n,
                            double std, float *dst);

/* The same, split between the OpenMP threads (bitwise the same floats). */
void ft_rng_normal_fill_f32_threads(uint64_t seed, uint64_t stream, uint64_t first, size_t n,
                                    double std, float *dst);

/* One value of the reference: (float)(std * ft_rng_normal(seed, stream, index)). What
 * the fills fall back to, and what a device's fill patches its unsure values with. */
float ft_rng_normal_f32(uint64_t seed, uint64_t stream, uint64_t index, double std);

#endif
