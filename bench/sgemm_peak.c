/* OpenBLAS sgemm throughput on this machine: the CPU peak a training step is measured
 * against. Prints "sgemm_gflops=<best of 5> n=<n> threads=<openblas threads>
 * core=<OpenBLAS kernel>". */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.2f;
    }
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.f, a, n, b, n, 0.f, c, n);
        double g = 2.0 * n * n * (double)n / (now() - t0) / 1e9;
        if (rep > 0 && g > best) /* first run warms up threads and pages */
            best = g;
    }
    printf("sgemm_gflops=%.1f n=%d threads=%d core=%s\n", best, n, openblas_get_num_threads(),
           openblas_get_corename());
    free(a);
    free(b);
    free(c);
    return 0;
}
