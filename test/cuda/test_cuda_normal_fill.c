/* The CUDA backend's normal_fill (on a GPU, or on the CPU execution harness) against
 * the reference, bitwise: every float must be (float)(std * ft_rng_normal(seed, stream,
 * first + i)), as the CPU backend's op gives it, whatever path a value took on the
 * device: the kernel's polynomials, the host's replacement of a value the kernel could
 * not vouch for (left NaN by the kernel, so a missed one cannot pass), or the whole
 * range made on the host when the kernel's list overflows. Ranges that start anywhere in
 * a tensor, several slices per call (FTMPI_NORMAL_FILL_SLICE), and the element after
 * the range left alone.
 *
 * Exit status: 0 pass, 1 failure, 77 (SKIP) without a CUDA device. */
#include "backend/backend.h"
#include "cuda_test_backends.h"
#include "util/rng.h"
#include "util/rng_fill.h"
#include "util/rng_normal_math.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ft_backend *cpu, *gpu;
static int failures, checks;

/* How many of [first, first + n) the polynomials cannot vouch for (the ones the
 * device's list carries), as the kernel decides it. */
static size_t unsure_count(uint64_t seed, uint64_t stream, uint64_t first, size_t n, double std)
{
    const uint64_t key = ft_rng_key(seed, stream);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        const double y = ft_rng_normal_fast(key, first + i, std);
        c += !ft_rng_normal_is_sure(y, (float)y, std);
    }
    return c;
}

/* Fills n values from `first` on both backends (one guard element after them) and
 * compares them with the reference; want_unsure: the case must exercise the list
 * (at least one value the kernel hands to the host). */
static void check(const char *what, size_t n, uint64_t first, double std, bool want_unsure)
{
    const uint64_t seed = 1234, stream = ft_rng_name_stream("model.layers.0.mlp.up_proj.weight");
    const float guard = 42.5f;
    float *ref = malloc((n + 1) * sizeof *ref), *got = malloc((n + 1) * sizeof *got);
    float *cgot = malloc((n + 1) * sizeof *cgot);
    for (size_t i = 0; i < n; i++)
        ref[i] = ft_rng_normal_f32(seed, stream, first + i, std);
    ref[n] = guard;
    float *g = gpu->ops->alloc(gpu, (n + 1) * sizeof(float));
    float *c = cpu->ops->alloc(cpu, (n + 1) * sizeof(float));
    gpu->ops->upload(gpu, g + n, &guard, sizeof guard);
    c[n] = guard;
    gpu->ops->normal_fill(gpu, g, n, seed, stream, first, std);
    cpu->ops->normal_fill(cpu, c, n, seed, stream, first, std);
    gpu->ops->download(gpu, got, g, (n + 1) * sizeof(float));
    gpu->ops->sync(gpu);
    memcpy(cgot, c, (n + 1) * sizeof(float));
    size_t differ = 0, cdiffer = 0, first_bad = n + 1;
    for (size_t i = 0; i <= n; i++) {
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0 && differ++ == 0)
            first_bad = i;
        cdiffer += memcmp(&cgot[i], &ref[i], sizeof(float)) != 0;
    }
    const size_t unsure = unsure_count(seed, stream, first, n, std);
    const bool ok = differ == 0 && cdiffer == 0 && (!want_unsure || unsure > 0);
    checks++;
    failures += !ok;
    printf("%s normal_fill %s: n %zu from %llu, std %g: %zu differ on the device", ok ? "ok  " : "FAIL",
           what, n, (unsigned long long)first, std, differ);
    if (differ)
        printf(" (first [%zu] %.9g, want %.9g)", first_bad, got[first_bad], ref[first_bad]);
    printf(", %zu on the CPU; %zu handed to the host\n", cdiffer, unsure);
    gpu->ops->free(gpu, g);
    cpu->ops->free(cpu, c);
    free(ref), free(got), free(cgot);
}

int main(void)
{
    const int rc = cuda_test_backends(&cpu, &gpu);
    if (rc)
        return rc;
    check("one slice", 300001, 12345, 0.02, true);
    check("far into a tensor", 20000, 3000000000ull, 1.0, false);
    check("one value", 1, 7, 0.02, false);
    check("nothing", 0, 0, 0.02, false);
    /* subnormal floats: the kernel vouches for none of them; within the list's room
     * (256 a slice of this size) the host replaces each, past it makes the range */
    check("all replaced", 200, 99, 1e-40, true);
    check("list overflow", 5000, 99, 1e-40, true);
    setenv("FTMPI_NORMAL_FILL_SLICE", "30000", 1);
    check("several slices", 100003, 555, 0.02, true);
    check("several slices, overflow", 70000, 555, 1e-40, true);
    unsetenv("FTMPI_NORMAL_FILL_SLICE");
    gpu->ops->sync(gpu);
    checks++;
    failures += gpu->bytes_in_use != 0;
    printf("%s no allocation leaked\n", gpu->bytes_in_use == 0 ? "ok  " : "FAIL");
    ft_backend_destroy(gpu);
    ft_backend_destroy(cpu);
    printf("%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
