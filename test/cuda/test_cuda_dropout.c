/* The CUDA backend's dropout op (on a GPU, or on the CPU execution harness) against the
 * CPU backend's, bitwise: the mask is one function of (seed, row0 + row, column) in
 * backend/dropout_mask.h and the arithmetic one fp32 product (and one fp32 sum when
 * accumulating), never contracted, so every bit must agree: fp32 and bf16 storage,
 * overwrite (also in place) and accumulate, shapes that do not fill a block, rows
 * numbered past 2^32, and p from 0.05 to 0.95. A non-trivial mask is checked too
 * (some elements dropped, some kept), so an op that copies or zeroes cannot pass.
 *
 * Exit status: 0 pass, 1 failure, 77 (SKIP) without a CUDA device. */
#include "backend/backend.h"
#include "cuda_test_backends.h"
#include "util/bf16.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ft_backend *cpu, *gpu;
static int failures, checks;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return lo + (hi - lo) * (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}

/* n random values in [-2, 2) stored as dt (host memory) */
static void *random_of(ft_dtype dt, size_t n)
{
    void *h = malloc(n * ft_dtype_size(dt) + 4);
    for (size_t i = 0; i < n; i++) {
        const float v = uniform(-2.0f, 2.0f);
        if (dt == FT_DTYPE_BF16)
            ((uint16_t *)h)[i] = ft_f32_to_bf16(v);
        else
            ((float *)h)[i] = v;
    }
    return h;
}

/* Runs the op on both backends from the same x (and y when accumulating; y = x in
 * place otherwise when in_place) and compares the bytes of y. */
static void check(ft_dtype dt, int rows, int cols, double p, uint64_t row0, bool accumulate,
                  bool in_place)
{
    const size_t n = (size_t)rows * cols, bytes = n * ft_dtype_size(dt);
    void *x = random_of(dt, n), *y = random_of(dt, n);
    void *cx = cpu->ops->alloc(cpu, bytes + 4), *cy = cpu->ops->alloc(cpu, bytes + 4);
    void *gx = gpu->ops->alloc(gpu, bytes + 4), *gy = gpu->ops->alloc(gpu, bytes + 4);
    cpu->ops->upload(cpu, cx, x, bytes);
    gpu->ops->upload(gpu, gx, x, bytes);
    cpu->ops->upload(cpu, cy, y, bytes);
    gpu->ops->upload(gpu, gy, y, bytes);
    const ft_dropout_mask m = ft_dropout_mask_make(p, 0xd0d0 + (uint64_t)rows, row0);
    cpu->ops->dropout(cpu, dt, in_place ? cx : cy, cx, rows, cols, m, accumulate);
    gpu->ops->dropout(gpu, dt, in_place ? gx : gy, gx, rows, cols, m, accumulate);
    void *got = malloc(bytes + 4), *want = malloc(bytes + 4);
    cpu->ops->download(cpu, want, in_place ? cx : cy, bytes);
    gpu->ops->download(gpu, got, in_place ? gx : gy, bytes);
    gpu->ops->sync(gpu);
    size_t differ = 0, zeros = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t es = ft_dtype_size(dt);
        differ += memcmp((char *)got + i * es, (char *)want + i * es, es) != 0;
        if (!accumulate)
            zeros += dt == FT_DTYPE_BF16 ? (((uint16_t *)want)[i] & 0x7fff) == 0
                                         : ((float *)want)[i] == 0.0f;
    }
    /* overwrite: some dropped, some kept (p in [0.05, 0.95] over >= 100 elements) */
    const bool mask_seen = accumulate || (zeros > 0 && zeros < n);
    const bool ok = differ == 0 && mask_seen;
    checks++;
    failures += !ok;
    printf("%s dropout %s %dx%d p %.2f row0 %llu%s%s: %zu of %zu elements differ, %zu dropped\n",
           ok ? "ok  " : "FAIL", ft_dtype_name(dt), rows, cols, p, (unsigned long long)row0,
           accumulate ? " accumulate" : "", in_place ? " in place" : "", differ, n, zeros);
    free(x), free(y), free(got), free(want);
    cpu->ops->free(cpu, cx), cpu->ops->free(cpu, cy);
    gpu->ops->free(gpu, gx), gpu->ops->free(gpu, gy);
}

int main(void)
{
    const int rc = cuda_test_backends(&cpu, &gpu);
    if (rc)
        return rc;
    const ft_dtype dts[2] = { FT_DTYPE_F32, FT_DTYPE_BF16 };
    for (int d = 0; d < 2; d++) {
        check(dts[d], 37, 129, 0.1, 0, false, false);
        check(dts[d], 37, 129, 0.1, 0, true, false);
        check(dts[d], 64, 96, 0.5, 5000000000ull, false, true);
        check(dts[d], 64, 96, 0.5, 5000000000ull, true, false);
        check(dts[d], 3, 1000, 0.95, 12345, false, false);
        check(dts[d], 200, 7, 0.05, 77, true, false);
    }
    ft_backend_destroy(gpu);
    ft_backend_destroy(cpu);
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
