/* backend.h's normal_fill on the device: the values are made where they are kept, so
 * a model's initialisation costs no host time and no transfer (the 1.2 B model's
 * 1.2 G values made on 16 host cores and uploaded took most of its start-up).
 *
 * The kernel (cuda_normal.cu) lists the few values the polynomials cannot vouch
 * for; they are computed here with the libm reference and written over. One wait per
 * slice of up to 64 M values, to read the list: this runs at start-up only. */
#include <stdlib.h>

#include "cuda_internal.h"
#include "cuda_state.h"
#include "util/rng.h"
#include "util/rng_fill.h"

/* Values per launch: keeps an index in 32 bits and bounds the list. The test hook
 * FTMPI_NORMAL_FILL_SLICE=<values> makes slices small enough for the harness to see
 * several. */
#define FILL_SLICE ((size_t)1 << 26)

static size_t fill_slice(void)
{
    const char *hook = getenv("FTMPI_NORMAL_FILL_SLICE");
    const long n = hook ? atol(hook) : 0;
    return n > 0 && (size_t)n < FILL_SLICE ? (size_t)n : FILL_SLICE;
}

/* Room in the list for 1 value in 256, where about 1 in 5,000 turn up; a slice with
 * more (a std so small that values are subnormal floats) is made on the host. */
static size_t unsure_cap(size_t slice)
{
    return slice / 256 + 256;
}

/* [first, first + n) made on the host, cap values at a time through host_val */
static void fill_on_host(ft_backend *be, float *dst, size_t n, uint64_t seed, uint64_t stream,
                         uint64_t first, double std, float *host_val, size_t cap)
{
    for (size_t a = 0; a < n; a += cap) {
        const size_t len = n - a < cap ? n - a : cap;
        ft_rng_normal_fill_f32_threads(seed, stream, first + a, len, std, host_val);
        be->ops->upload(be, dst + a, host_val, len * sizeof(float));
    }
}

void ft_cuda_normal_fill(ft_backend *be, float *dst, size_t n, uint64_t seed, uint64_t stream,
                         uint64_t first, double std)
{
    if (n == 0)
        return;
    const cudaStream_t st = ft_cuda_stream(be);
    const uint64_t key = ft_rng_key(seed, stream);
    const size_t slice = fill_slice();
    const size_t cap = unsure_cap(n < slice ? n : slice);
    /* device: the count, then the indices, then the replacement values */
    char *scratch = ft_cuda_scratch(be, 256 + cap * (sizeof(uint32_t) + sizeof(float)));
    unsigned *n_unsure = (unsigned *)scratch;
    uint32_t *unsure = (uint32_t *)(scratch + 256);
    float *fixed = (float *)(unsure + cap);
    uint32_t *host_idx = malloc(cap * sizeof *host_idx);
    float *host_val = malloc(cap * sizeof *host_val);
    if (!host_idx || !host_val)
        ft_cuda_check(cudaErrorMemoryAllocation, "normal_fill (host list)");
    for (size_t a = 0; a < n; a += slice) {
        const size_t len = n - a < slice ? n - a : slice;
        unsigned count = 0;
        ft_cuda_check(cudaMemsetAsync(n_unsure, 0, sizeof *n_unsure, st), "normal_fill (count)");
        ft_cuda_check(ft_cuda_launch_normal_fill(dst + a, len, key, first + a, std, n_unsure,
                                                 unsure, (unsigned)cap, st),
                      "normal_fill");
        ft_cuda_check(cudaMemcpyAsync(&count, n_unsure, sizeof count, cudaMemcpyDeviceToHost, st),
                      "normal_fill (count)");
        ft_cuda_check(cudaStreamSynchronize(st), "normal_fill (synchronize)");
        if (count > cap) {
            fill_on_host(be, dst + a, len, seed, stream, first + a, std, host_val, cap);
            continue;
        }
        if (count == 0)
            continue;
        ft_cuda_check(cudaMemcpyAsync(host_idx, unsure, count * sizeof *host_idx,
                                      cudaMemcpyDeviceToHost, st),
                      "normal_fill (list)");
        ft_cuda_check(cudaStreamSynchronize(st), "normal_fill (synchronize)");
        for (unsigned k = 0; k < count; k++)
            host_val[k] = ft_rng_normal_f32(seed, stream, first + a + host_idx[k], std);
        ft_cuda_check(cudaMemcpyAsync(fixed, host_val, count * sizeof *host_val,
                                      cudaMemcpyHostToDevice, st),
                      "normal_fill (values)");
        ft_cuda_check(ft_cuda_launch_scatter_f32(dst + a, unsure, fixed, count, st),
                      "normal_fill (scatter)");
        /* host_val is written again by the next slice: the copy must have read it */
        ft_cuda_check(cudaStreamSynchronize(st), "normal_fill (synchronize)");
    }
    free(host_idx);
    free(host_val);
}
