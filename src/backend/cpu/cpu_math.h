/* Scalar math helpers shared by the CPU kernels, written so that the compiler can
 * vectorise the loops that call them (no libm calls, no branches: selects only). */
#ifndef FT_BACKEND_CPU_MATH_H
#define FT_BACKEND_CPU_MATH_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ft_cpu_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float ft_cpu_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* exp(x) in fp32, accurate to ~2 ulp over the normal range, vectorisable.
 *
 *   exp(x) = 2^n * exp(r),  n = round(x / ln2),  r = x - n*ln2  (|r| <= ln2/2)
 *
 * n is rounded with the 1.5*2^23 trick (adding it leaves round-to-nearest(x/ln2)
 * in the low mantissa bits); n*ln2 is subtracted in two parts (Cody-Waite: ln2_hi
 * has few enough bits that n*ln2_hi is exact) so that r keeps full precision;
 * exp(r) is the degree-7 Taylor polynomial (truncation error r^8/8! < 6e-9
 * relative) and 2^n is built in the exponent field.
 * Results below 2^-126 (x < -87.33, including x = -inf) flush to +0, which is
 * what masked attention scores need; results above FLT_MAX (x > 88.72) are +inf,
 * as with expf (so 1 / (1 + exp(-x)) is exactly 0 far left). NaN gives NaN. */
static inline float ft_cpu_expf(float x)
{
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;      /* 12 significant bits */
    const float ln2_lo = 1.428606765330187e-06f;  /* ln2 - ln2_hi */
    const float round_magic = 12582912.0f;         /* 1.5 * 2^23 */
    float xc = x > 88.72283f ? 88.72283f : x;
    xc = xc < -87.5f ? -87.5f : xc;
    float t = xc * log2e + round_magic;
    float nf = t - round_magic;
    int32_t n = (int32_t)(ft_cpu_f32_bits(t) - ft_cpu_f32_bits(round_magic));
    float r = (xc - nf * ln2_hi) - nf * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* xc in [-87.5, 88.72] gives n in [-126, 128]; 2^n = 2^a * 2^b with
     * a = floor(n/2), b = n - a, both normal floats. */
    int32_t a = (n - (n & 1)) / 2, b = n - a;
    float y = p * ft_cpu_f32_from_bits((uint32_t)(a + 127) << 23) *
              ft_cpu_f32_from_bits((uint32_t)(b + 127) << 23);
    y = x < -87.33654f ? 0.0f : y;
    y = x > 88.72283f ? ft_cpu_f32_from_bits(0x7F800000u) : y;
    return x != x ? x : y;
}

#endif
