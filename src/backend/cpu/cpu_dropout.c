/* Inverted dropout with a recomputed mask (backend.h, backend/dropout_mask.h), for
 * fp32 and bf16 storage directly: each element is widened, multiplied once (and added
 * once when accumulating) in fp32 and rounded once, so no fp32 copy is needed. Rows
 * are split between threads; an element's value depends on (seed, row0 + i, j) only,
 * so the result is the same with any number of threads. The code is ISO C (-std=c11:
 * no contraction of x * scale + y into an FMA), as the CUDA kernel's __fmul_rn and
 * __fadd_rn, hence the same bits. */
#include "backend/cpu/cpu_internal.h"
#include "util/bf16.h"

static inline float load(const void *p, ft_dtype dt, size_t i)
{
    return dt == FT_DTYPE_BF16 ? ft_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline void store(void *p, ft_dtype dt, size_t i, float v)
{
    if (dt == FT_DTYPE_BF16)
        ((uint16_t *)p)[i] = ft_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

void ft_cpu_dropout(ft_backend *be, ft_dtype dt, void *y, const void *x, int rows, int cols,
                    ft_dropout_mask m, bool accumulate)
{
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols >= FT_CPU_PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const uint64_t key = ft_dropout_row_key(&m, (uint64_t)i);
        const size_t base = (size_t)i * (size_t)cols;
        for (int j = 0; j < cols; j++) {
            const float kept = ft_dropout_keep(&m, key, (uint64_t)j) ? load(x, dt, base + j) * m.scale
                                                                      : 0.0f;
            store(y, dt, base + j, accumulate ? load(y, dt, base + j) + kept : kept);
        }
    }
}
