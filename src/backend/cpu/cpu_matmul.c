/* Dense algebra: matmul through CBLAS, and the vector ops used by the optimiser
 * and gradient clipping (add, scale, sum of squares). */
#include "backend/cpu/cpu_internal.h"

#include <cblas.h>

/* c[m,n] = alpha * op(a) * op(b) + beta * c (row-major).
 * op(a) is [m,k]: stored [m,k] (lda = k), or [k,m] when trans_a (lda = m).
 * op(b) is [k,n]: stored [k,n] (ldb = n), or [n,k] when trans_b (ldb = k).
 * BLAS leaves c unread when beta == 0, so stale NaN in c does not leak through. */
void ft_cpu_matmul(ft_backend *be, float *c, const float *a, const float *b, int m, int n, int k,
                   bool trans_a, bool trans_b, float alpha, float beta)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        /* Empty inner dimension: op(a)op(b) = 0, so c = beta * c (exactly 0 when beta = 0). */
        size_t count = (size_t)m * (size_t)n;
        for (size_t i = 0; i < count; i++)
            c[i] = beta == 0.0f ? 0.0f : beta * c[i];
        return;
    }
    int lda = trans_a ? m : k;
    int ldb = trans_b ? k : n;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

void ft_cpu_add(ft_backend *be, float *y, const float *x, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
}

void ft_cpu_scale(ft_backend *be, float *x, float s, size_t n)
{
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

/* sum x^2 accumulated in fp64, with a result that does not depend on the number
 * of threads: the vector is cut into at most SUMSQ_MAX_CHUNKS chunks whose bounds
 * depend on n only; each chunk is summed (in any thread), then the chunk sums are
 * added in chunk order. */
#define SUMSQ_MAX_CHUNKS 1024
#define SUMSQ_MIN_CHUNK 16384

double ft_cpu_sum_squares(ft_backend *be, const float *x, size_t n)
{
    if (n == 0)
        return 0.0;
    size_t chunk = (n + SUMSQ_MAX_CHUNKS - 1) / SUMSQ_MAX_CHUNKS;
    if (chunk < SUMSQ_MIN_CHUNK)
        chunk = SUMSQ_MIN_CHUNK;
    long chunks = (long)((n + chunk - 1) / chunk);
    double partial[SUMSQ_MAX_CHUNKS];
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (long c = 0; c < chunks; c++) {
        size_t lo = (size_t)c * chunk;
        size_t hi = lo + chunk < n ? lo + chunk : n;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (size_t i = lo; i < hi; i++)
            s += (double)x[i] * (double)x[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (long c = 0; c < chunks; c++)
        total += partial[c];
    return total;
}

void ft_cpu_sum_squares_each(ft_backend *be, const float *const *x, const size_t *n, int count,
                             double *out)
{
    for (int i = 0; i < count; i++)
        out[i] = ft_cpu_sum_squares(be, x[i], n[i]);
}
