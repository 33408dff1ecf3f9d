/* Helpers shared by the backend tests: a seeded RNG, backend buffers, error
 * measurement against double-precision references, and central finite
 * differences. */
#ifndef FT_TEST_BACKEND_TEST_UTIL_H
#define FT_TEST_BACKEND_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* ---- random numbers (xorshift64*, reproducible across platforms) ---- */
typedef struct bt_rng {
    uint64_t state;
} bt_rng;

bt_rng bt_rng_make(uint64_t seed);
uint64_t bt_rng_u64(bt_rng *r);
double bt_rng_uniform(bt_rng *r, double lo, double hi); /* [lo, hi) */
int bt_rng_int(bt_rng *r, int n);                        /* [0, n) */
void bt_fill_uniform(float *x, size_t n, bt_rng *r, float lo, float hi);

/* ---- conversions ---- */
double *bt_to_double(const float *x, size_t n); /* malloc'd copy; caller frees */
float *bt_copy_floats(const float *x, size_t n);

/* ---- backend buffers (the tests use the ops, as a CUDA backend would need) ---- */
ft_backend *bt_backend_create(void);           /* CPU backend, asserts on failure */
ft_backend *bt_backend_create_isa(const char *isa); /* with FT_CPU_ISA=isa */
float *bt_upload(ft_backend *be, const float *host, size_t n);
int32_t *bt_upload_i32(ft_backend *be, const int32_t *host, size_t n);
void bt_download(ft_backend *be, float *host, const float *dev, size_t n);

/* ---- comparisons ----
 * Passes when max_i |got_i - want_i| <= rel * max_i |want_i| + abs_tol; prints the
 * errors either way when FT_TEST_VERBOSE is set, and the worst element on failure. */
bool bt_close(const char *what, const float *got, const double *want, size_t n, double rel,
              double abs_tol);
bool bt_close_ff(const char *what, const float *got, const float *want, size_t n, double rel,
                 double abs_tol);
double bt_max_abs(const double *x, size_t n);

/* ---- finite differences ----
 * grad[i] = (f(x + h e_i) - f(x - h e_i)) / (2h), all in double; x is restored.
 * f reads x through its ctx. Truncation error is O(h^2 f'''), so with O(1)
 * inputs and h = 1e-4 the FD gradient is good to ~1e-9, far below fp32 noise. */
typedef double (*bt_objective_fn)(void *ctx);
void bt_fd_gradient(double *grad, double *x, size_t n, double h, bt_objective_fn f, void *ctx);

/* sum_i r_i y_i: the scalar objective whose gradient with respect to y is r. */
double bt_dot(const double *r, const double *y, size_t n);

#endif
