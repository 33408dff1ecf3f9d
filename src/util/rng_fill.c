#include "util/rng_fill.h"

#include "util/rng.h"
#include "util/rng_normal_math.h"

void ft_rng_normal_fill_f32(uint64_t seed, uint64_t stream, uint64_t first, size_t n,
                            double std, float *dst)
{
    /* ft_rng_u64's key, once per call rather than twice per value */
    const uint64_t key = ft_rng_key(seed, stream);
    enum { BLOCK = 256 };
    int sure[BLOCK];
    for (size_t b = 0; b < n; b += BLOCK) {
        const size_t len = n - b < BLOCK ? n - b : BLOCK;
        float *out = dst + b;
        /* branch-free, values and their check alike, so that it runs in SIMD lanes */
#pragma omp simd
        for (size_t j = 0; j < len; j++) {
            const double y = ft_rng_normal_fast(key, first + b + j, std);
            const float f = (float)y;
            sure[j] = ft_rng_normal_is_sure(y, f, std);
            out[j] = f;
        }
        for (size_t j = 0; j < len; j++)
            if (!sure[j])
                out[j] = ft_rng_normal_f32(seed, stream, first + b + j, std);
    }
}

float ft_rng_normal_f32(uint64_t seed, uint64_t stream, uint64_t index, double std)
{
    return (float)(std * ft_rng_normal(seed, stream, index));
}

/* Elements per OpenMP work item: large enough to amortise the scheduling, small enough
 * to balance a block's tensors between the threads. */
#define FILL_CHUNK ((size_t)1 << 16)

void ft_rng_normal_fill_f32_threads(uint64_t seed, uint64_t stream, uint64_t first, size_t n,
                                    double std, float *dst)
{
    /* every element is a pure function of (seed, stream, index), so the split between
     * threads cannot change a value: the same bits as one thread */
    const long chunks = (long)((n + FILL_CHUNK - 1) / FILL_CHUNK);
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (long c = 0; c < chunks; c++) {
        const size_t a = (size_t)c * FILL_CHUNK;
        const size_t len = n - a < FILL_CHUNK ? n - a : FILL_CHUNK;
        ft_rng_normal_fill_f32(seed, stream, first + a, len, std, dst + a);
    }
}
