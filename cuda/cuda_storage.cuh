/* Storage types of the kernels' tensors (issue #12's bf16 recipe).
 *
 * A kernel is written once over its storage type T and instantiated for float and
 * ft_bf16 (bf16 bits): it loads with ft_ld, which widens to fp32, computes in fp32, and
 * stores with ft_st, which rounds to nearest even, so each output is rounded once.
 * Parameter gradients have their own storage (fp32 accumulators, or a bf16 staging
 * buffer), chosen per launch: ft_grad_add adds an fp32 sum into either, rounding once.
 * FT_WITH_STORAGE(dt, T, ...) runs its statements with T the storage of dt, for the
 * host-side launchers. */
#ifndef FT_CUDA_STORAGE_CUH
#define FT_CUDA_STORAGE_CUH

#include <stddef.h>
#include <stdint.h>

/* bf16 bits as their own type, so that templates tell them from integers */
struct ft_bf16 {
    uint16_t bits;
};

__device__ __forceinline__ float ft_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ft_ld(const ft_bf16 *p, size_t i)
{
    return ft_f32_from_bf16(p[i].bits);
}
__device__ __forceinline__ void ft_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void ft_st(ft_bf16 *p, size_t i, float v)
{
    p[i].bits = ft_bf16_from_f32(v);
}

/* g[i] += v for a gradient stored as fp32 (bf16 == 0) or bf16 bits; the flag is
 * uniform over a launch, so the branch never diverges. */
__device__ __forceinline__ void ft_grad_add(void *g, int bf16, size_t i, float v)
{
    if (bf16) {
        uint16_t *h = (uint16_t *)g;
        h[i] = ft_bf16_from_f32(ft_f32_from_bf16(h[i]) + v);
    } else {
        ((float *)g)[i] += v;
    }
}

#define FT_WITH_STORAGE(dt, T, ...)                                                                \
    do {                                                                                           \
        if ((dt) == FT_DTYPE_BF16) {                                                               \
            typedef ft_bf16 T;                                                                     \
            __VA_ARGS__;                                                                           \
        } else {                                                                                   \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
    } while (0)

#endif
