/* Bias of a linear layer: y = x W^T + b, b broadcast over the rows.
 * Forward adds b to every row; backward sums dy over rows, db_c = sum_r dy_rc.
 * The gradient is parallel over columns (each thread owns a range of c and walks
 * the rows in order), so every db_c is summed in the same order for any number of
 * threads. */
#include "backend/cpu/cpu_internal.h"

void ft_cpu_bias_add(ft_backend *be, float *y, const float *b, int rows, int dim)
{
    (void)be;
    const size_t work = (size_t)rows * (size_t)dim;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * dim;
#pragma omp simd
        for (int c = 0; c < dim; c++)
            yr[c] += b[c];
    }
}

/* Columns per task: a multiple of 16 floats so that tasks never share a cache line. */
#define BIAS_COLS 64

void ft_cpu_bias_grad(ft_backend *be, float *db, const float *dy, int rows, int dim)
{
    (void)be;
    const size_t work = (size_t)rows * (size_t)dim;
    const int chunks = (dim + BIAS_COLS - 1) / BIAS_COLS;
#pragma omp parallel for schedule(static) if (work >= FT_CPU_PAR_MIN && chunks > 1)
    for (int ch = 0; ch < chunks; ch++) {
        const int c0 = ch * BIAS_COLS;
        const int n = dim - c0 < BIAS_COLS ? dim - c0 : BIAS_COLS;
        float acc[BIAS_COLS] = { 0 };
        for (int r = 0; r < rows; r++) {
            const float *d = dy + (size_t)r * dim + c0;
#pragma omp simd
            for (int c = 0; c < n; c++)
                acc[c] += d[c];
        }
        for (int c = 0; c < n; c++)
            db[c0 + c] += acc[c];
    }
}
