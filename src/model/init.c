#include "model/init.h"

#include <string.h>

#include "util/rng.h"

static uint64_t name_stream(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void ft_model_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                         double std, float *dst)
{
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo = begin > ti->offset ? begin : ti->offset;
        size_t hi = end < ti->offset + ti->numel ? end : ti->offset + ti->numel;
        if (lo >= hi)
            continue;
        uint64_t stream = name_stream(ti->name);
        const size_t len = strlen(ti->name);
        const bool bias = len >= 5 && strcmp(ti->name + len - 5, ".bias") == 0;
        for (size_t i = lo; i < hi; i++)
            dst[i - begin] = ti->ndim == 2
                                 ? (float)(std * ft_rng_normal(seed, stream, i - ti->offset))
                                 : bias ? 0.0f : 1.0f;
    }
}
