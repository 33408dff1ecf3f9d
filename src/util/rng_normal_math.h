/* The fast path of the normal fill (util/rng_fill.h), for host and device code: the
 * host's SIMD loop and the CUDA backend's kernel compute each value with these same
 * polynomials, and both hand the rare value they cannot vouch for to the libm
 * reference (ft_rng_normal), so the two produce the same floats.
 *
 * Why the floats agree although the doubles may not: the polynomials are within
 * ~1e-15 (relative) of the exact function, and so is libm; whether a compiler fuses a
 * multiply and an add changes a double by an ulp or two (1e-16). A value is trusted
 * only when every double within 1e-12 of it rounds to the same float; that margin is
 * a thousand times the error of either side. */
#ifndef FT_UTIL_RNG_NORMAL_MATH_H
#define FT_UTIL_RNG_NORMAL_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/rng.h"

/* ln(x) for x in [2^-54, 1): x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s),
 * s = (m - 1)/(m + 1), |s| <= 0.1716, by its series to s^23 (the next term is below
 * 1e-18 relative). m - 1 is exact, so values near 1 keep their relative accuracy. */
FT_RNG_FN double ft_rng_fast_log(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    double m;
    memcpy(&m, &bits, sizeof m);
    const int big = m > 1.4142135623730951; /* selects, not a branch: the loop vectorises */
    m = big ? m * 0.5 : m;
    e += big;
    const double s = (m - 1.0) / (m + 1.0), z = s * s;
    double p = 1.0 / 23;
    p = p * z + 1.0 / 21;
    p = p * z + 1.0 / 19;
    p = p * z + 1.0 / 17;
    p = p * z + 1.0 / 15;
    p = p * z + 1.0 / 13;
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    /* ln 2 in two parts: e * LN2_HI is exact for |e| < 2^11 */
    const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    return e * LN2_HI + (e * LN2_LO + 2.0 * s * (1.0 + z * p));
}

/* cos(x) for x in [0, 2 pi]: r = x - k pi/2 (k = 0..4, pi/2 in three parts so r is
 * exact to ~1e-19 absolute), then +-cos r or +-sin r by Taylor series on |r| <= pi/4
 * (next terms below 1e-17). Absolute error below 1e-16. */
FT_RNG_FN double ft_rng_fast_cos(double x)
{
    const double PIO2_1 = 1.57079632673412561417e+00, PIO2_2 = 6.07710050650619224932e-11,
                 PIO2_3 = 2.02226624879595063154e-21;
    const int k = (int)(x * 0.63661977236758134308 + 0.5);
    const double r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3, z = r * r;
    double c = -1.0 / 20922789888000.0;                 /* -1/16! */
    c = c * z + 1.0 / 87178291200.0;                    /*  1/14! */
    c = c * z - 1.0 / 479001600.0;                      /* -1/12! */
    c = c * z + 1.0 / 3628800.0;                        /*  1/10! */
    c = c * z - 1.0 / 40320.0;
    c = c * z + 1.0 / 720.0;
    c = c * z - 1.0 / 24.0;
    c = c * z + 0.5;
    c = 1.0 - z * c; /* written as 1 - z (1/2 - z/24 + ...): */
    double sn = 1.0 / 355687428096000.0;                /*  1/17! */
    sn = sn * z - 1.0 / 1307674368000.0;                /* -1/15! */
    sn = sn * z + 1.0 / 6227020800.0;                   /*  1/13! */
    sn = sn * z - 1.0 / 39916800.0;                     /* -1/11! */
    sn = sn * z + 1.0 / 362880.0;
    sn = sn * z - 1.0 / 5040.0;
    sn = sn * z + 1.0 / 120.0;
    sn = sn * z - 1.0 / 6.0;
    sn = r + r * z * sn;
    /* k = 0: cos r, 1: -sin r, 2: -cos r, 3: sin r */
    const double v = (k & 1) ? sn : c;
    return ((k + 1) & 2) ? -v : v;
}

/* sqrt(x) for positive normal x as x / sqrt(x): the bit-level first guess of 1/sqrt(x)
 * (within 3.5 %) and four Newton steps, each squaring the relative error (0.035,
 * 2e-3, 5e-6, 3e-11, 1e-21), so rounding (a few ulp) is what is left. libm's sqrt
 * would do as well, but may set errno, which keeps a loop that calls it scalar. */
FT_RNG_FN double ft_rng_fast_sqrt(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    bits = 0x5fe6eb50c7b537a9ull - (bits >> 1);
    double r;
    memcpy(&r, &bits, sizeof r);
    const double h = 0.5 * x;
    r = r * (1.5 - h * r * r);
    r = r * (1.5 - h * r * r);
    r = r * (1.5 - h * r * r);
    r = r * (1.5 - h * r * r);
    return x * r;
}

/* True when every double within delta of y rounds to the same float as y. Free of
 * branches (& not &&), so that the host's loop over it runs in SIMD lanes. */
FT_RNG_FN int ft_rng_rounds_safely(double y, float f, double delta)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    const uint32_t e = b & 0x7f800000u;
    /* zero, subnormal or not finite: left to the reference */
    const int normal = (e != 0) & (e != 0x7f800000u);
    uint32_t up = b + 1, down = b - 1; /* the float neighbours away from and toward 0 */
    float fu, fd;
    memcpy(&fu, &up, sizeof fu);
    memcpy(&fd, &down, sizeof fd);
    const double mid_out = 0.5 * ((double)f + (double)fu), mid_in = 0.5 * ((double)f + (double)fd);
    return normal & (fabs(y - mid_out) > delta) & (fabs(y - mid_in) > delta);
}

/* 2 pi u2 as ft_rng_normal writes it, with M_PI's double (math.h need not define it) */
#define FT_RNG_PI 3.14159265358979323846

/* std * (Box-Muller normal of counter index idx) by the polynomials, where
 * key = ft_rng_key(seed, stream): the uniforms are those of
 * ft_rng_uniform(seed, stream, 2 idx) and (.., 2 idx + 1). */
FT_RNG_FN double ft_rng_normal_fast(uint64_t key, uint64_t idx, double std)
{
    const double u1 = ft_rng_key_uniform(key, 2 * idx);
    const double u2 = ft_rng_key_uniform(key, 2 * idx + 1);
    return std * (ft_rng_fast_sqrt(-2.0 * ft_rng_fast_log(u1)) *
                  ft_rng_fast_cos(2.0 * FT_RNG_PI * u2));
}

/* Whether f = (float)y, y from ft_rng_normal_fast, is the reference's float for sure. */
FT_RNG_FN int ft_rng_normal_is_sure(double y, float f, double std)
{
    return ft_rng_rounds_safely(y, f, 1e-12 * (fabs(y) + fabs(std)));
}

#endif
