/* bfloat16 <-> float on the host: bf16 is the top 16 bits of an IEEE fp32.
 * Rounding is to nearest, ties to even; NaN stays a (quiet) NaN. */
#ifndef FT_UTIL_BF16_H
#define FT_UTIL_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t ft_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, force a mantissa bit */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);     /* round half to even on bit 16 */
    return (uint16_t)(u >> 16);
}

static inline float ft_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
