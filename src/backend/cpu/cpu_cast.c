/* fp32 <-> bf16. bf16 is the upper half of an fp32 (sign, 8-bit exponent, 7-bit
 * mantissa), stored as raw uint16 bits.
 * Down-cast with round to nearest, ties to even: add 0x7FFF plus the lowest kept
 * bit, then truncate; a carry out of the mantissa correctly bumps the exponent
 * (values past the largest bf16 round to inf, inf stays inf, denormals round
 * like any other value). NaN is not rounded (its payload could carry into the
 * exponent or vanish, turning it into inf): it keeps its sign and high payload
 * and gets the quiet bit set, so it stays NaN. Up-cast is exact: shift left. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

static inline uint16_t cpu_bf16_from_f32(float x)
{
    uint32_t u = ft_cpu_f32_bits(x);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (uint16_t)(is_nan ? quiet_nan : rounded);
}

void ft_cpu_f32_to_bf16(ft_backend *be, uint16_t *dst, const float *src, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = cpu_bf16_from_f32(src[i]);
}

void ft_cpu_bf16_to_f32(ft_backend *be, float *dst, const uint16_t *src, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        dst[i] = ft_cpu_f32_from_bits((uint32_t)src[i] << 16);
}
