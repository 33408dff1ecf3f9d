/* Throughput of the backend's matmul on the shapes of a training step, three ways in one
 * run: fp32 (OpenBLAS sgemm), bf16 operands on the native AVX512-BF16 kernel, and bf16
 * operands widened to fp32 for sgemm (FT_CPU_ISA=avx512). For each shape it prints the
 * GFLOP/s of each and the bf16/fp32 time ratios.
 *   bench_cpu_gemm_bf16 [TOKENS HIDDEN FFN]   (default 1024 512 1376: bench/cpu_step.sh's model)
 * The three GEMMs of a linear layer y = x W^T: forward (N x out x in), input gradient
 * dx = dy W (N x in x out), weight gradient dW = dy^T x (out x in x N, fp32 output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_internal.h"
#include "backend_test_util.h"
#include "util/bf16.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct shape {
    const char *what;
    int m, n, k;
    bool ta, tb;
    bool c_f32; /* bf16 recipe: weight gradients are fp32, activations bf16 */
} shape;

/* Best seconds of 5 timed calls after one warm-up. */
static double time_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b,
                          const shape *s)
{
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now();
        be->ops->matmul(be, t, c, a, b, s->m, s->n, s->k, s->ta, s->tb, 1.0f, 0.0f);
        double dt = now() - t0;
        if (rep > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    const int N = argc > 3 ? atoi(argv[1]) : 1024, H = argc > 3 ? atoi(argv[2]) : 512;
    const int F = argc > 3 ? atoi(argv[3]) : 1376;
    if (!ft_cpu_gemm_bf16_available()) {
        printf("no AVX512-BF16 on this CPU: the native bf16 GEMM cannot run here\n");
        return 0;
    }
    ft_backend *native = bt_backend_create(), *widened = bt_backend_create_isa("avx512");
    const shape shapes[] = {
        { "fwd  up   ", N, F, H, false, true, false },
        { "fwd  down ", N, H, F, false, true, false },
        { "dx   up   ", N, H, F, false, false, false },
        { "dW   up   ", F, H, N, true, false, true },
    };
    size_t max = (size_t)N * F > (size_t)F * H ? (size_t)N * F : (size_t)F * H;
    if ((size_t)N * H > max)
        max = (size_t)N * H;
    float *fa = malloc(max * 4), *fb = malloc(max * 4), *fc = malloc(max * 4);
    uint16_t *ha = malloc(max * 2), *hb = malloc(max * 2), *hc = malloc(max * 4);
    bt_rng r = bt_rng_make(3);
    bt_fill_uniform(fa, max, &r, -1, 1);
    bt_fill_uniform(fb, max, &r, -1, 1);
    for (size_t i = 0; i < max; i++) {
        ha[i] = ft_f32_to_bf16(fa[i]);
        hb[i] = ft_f32_to_bf16(fb[i]);
    }
    printf("shape            m     n     k | fp32 GF/s | bf16 native GF/s | bf16 widened GF/s | "
           "native/fp32 time | widened/fp32 time\n");
    double t32_all = 0, tn_all = 0, tw_all = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        ft_gemm_types tb = { FT_DTYPE_BF16, FT_DTYPE_BF16, s->c_f32 ? FT_DTYPE_F32 : FT_DTYPE_BF16 };
        double t32 = time_matmul(native, FT_GEMM_F32, fc, fa, fb, s);
        double tn = time_matmul(native, tb, hc, ha, hb, s);
        double tw = time_matmul(widened, tb, hc, ha, hb, s);
        double fl = 2.0 * s->m * s->n * (double)s->k / 1e9;
        printf("%s %5d %5d %5d | %9.1f | %16.1f | %17.1f | %16.2f | %17.2f\n", s->what, s->m, s->n,
               s->k, fl / t32, fl / tn, fl / tw, tn / t32, tw / t32);
        t32_all += t32, tn_all += tn, tw_all += tw;
    }
    printf("all four: bf16 native/fp32 time %.2f, bf16 widened/fp32 time %.2f\n", tn_all / t32_all,
           tw_all / t32_all);
    ft_backend_destroy(native);
    ft_backend_destroy(widened);
    free(fa), free(fb), free(fc), free(ha), free(hb), free(hc);
    return 0;
}
