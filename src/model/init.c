#include "model/init.h"

#include <string.h>

#include "model/lora.h"
#include "util/rng.h"
#include "util/rng_fill.h"

/* Elements per OpenMP work item: large enough to amortise the scheduling, small enough
 * to balance a block's tensors between the threads. */
#define INIT_CHUNK ((size_t)1 << 16)

void ft_model_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                         double std, float *dst)
{
    if (u->kind == FT_UNIT_ADAPTER) {
        ft_lora_init_range(u, begin, end, seed, dst);
        return;
    }
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo, hi;
        if (!ft_tensor_overlap(ti, begin, end, &lo, &hi))
            continue;
        if (ti->ndim != 2) {
            const size_t len = strlen(ti->name);
            const bool bias = len >= 5 && strcmp(ti->name + len - 5, ".bias") == 0;
            for (size_t i = lo; i < hi; i++)
                dst[i - begin] = bias ? 0.0f : 1.0f;
            continue;
        }
        /* every element is a pure function of (seed, name, index), so the split between
         * threads cannot change a value: the same bits as one thread */
        const uint64_t stream = ft_rng_name_stream(ti->name);
        const long chunks = (long)((hi - lo + INIT_CHUNK - 1) / INIT_CHUNK);
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (long c = 0; c < chunks; c++) {
            const size_t a = lo + (size_t)c * INIT_CHUNK;
            const size_t n = hi - a < INIT_CHUNK ? hi - a : INIT_CHUNK;
            ft_rng_normal_fill_f32(seed, stream, a - ti->offset, n, std, dst + (a - begin));
        }
    }
}
