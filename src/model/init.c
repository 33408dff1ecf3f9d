#include "model/init.h"

#include <string.h>

#include "model/lora.h"
#include "util/rng.h"
#include "util/rng_fill.h"

static void init_through_host(ft_backend *be, const ft_unit_layout *u, size_t begin, size_t end,
                              uint64_t seed, double std, float *dst, float *host, size_t host_n);

/* The tensors of unit u (not an adapter) within [begin, end) into dst: 2-D weights
 * N(0, std^2), on the host (be NULL) or by be's normal_fill where be keeps dst; vectors
 * (norm weights 1, biases 0) made on the host, through host[0 .. host_n) for a be. */
static void init_tensors(ft_backend *be, const ft_unit_layout *u, size_t begin, size_t end,
                         uint64_t seed, double std, float *dst, float *host, size_t host_n)
{
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo, hi;
        if (!ft_tensor_overlap(ti, begin, end, &lo, &hi))
            continue;
        float *out = dst + (lo - begin);
        if (ti->ndim == 2) { /* the bulk of the model: made where it is kept */
            const uint64_t stream = ft_rng_name_stream(ti->name), first = lo - ti->offset;
            if (be)
                be->ops->normal_fill(be, out, hi - lo, seed, stream, first, std);
            else
                ft_rng_normal_fill_f32_threads(seed, stream, first, hi - lo, std, out);
        } else if (be) { /* a vector: hidden-size elements */
            init_through_host(be, u, lo, hi, seed, std, out, host, host_n);
        } else {
            const size_t len = strlen(ti->name);
            const bool bias = len >= 5 && strcmp(ti->name + len - 5, ".bias") == 0;
            for (size_t i = 0; i < hi - lo; i++)
                out[i] = bias ? 0.0f : 1.0f;
        }
    }
}

void ft_model_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                         double std, float *dst)
{
    if (u->kind == FT_UNIT_ADAPTER)
        ft_lora_init_range(u, begin, end, seed, dst);
    else
        init_tensors(NULL, u, begin, end, seed, std, dst, NULL, 0);
}

/* [begin, end) of unit u into be's dst through host[0 .. host_n), piece by piece */
static void init_through_host(ft_backend *be, const ft_unit_layout *u, size_t begin, size_t end,
                              uint64_t seed, double std, float *dst, float *host, size_t host_n)
{
    for (size_t p = begin; p < end; p += host_n) {
        const size_t n = end - p < host_n ? end - p : host_n;
        ft_model_init_range(u, p, p + n, seed, std, host);
        be->ops->upload(be, dst + (p - begin), host, n * sizeof(float));
    }
}

void ft_model_init_range_on(ft_backend *be, const ft_unit_layout *u, size_t begin, size_t end,
                            uint64_t seed, double std, float *dst, float *host, size_t host_n)
{
    if (u->kind == FT_UNIT_ADAPTER) /* small, and made by its own rule */
        init_through_host(be, u, begin, end, seed, std, dst, host, host_n);
    else
        init_tensors(be, u, begin, end, seed, std, dst, host, host_n);
}
