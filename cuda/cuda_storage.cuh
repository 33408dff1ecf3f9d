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

/* Eight consecutive values p[i..i+7] at once: one 16-byte load or store for bf16, two for
 * fp32, where the scalar forms above issue eight 2- or 4-byte accesses (a warp of scalar
 * bf16 loads moves 64 bytes an instruction, which keeps elementwise kernels near 40 % of
 * HBM bandwidth on an H100). The caller makes sure that p + i is 16-byte aligned: the
 * host launcher checks the base pointers with ft_aligned16 and i is a multiple of 8.
 * Each value is widened and rounded exactly as ft_ld/ft_st do, so a kernel gives the same
 * bits by either path. bf16 pairs sit in a 32-bit word little-endian: the element of the
 * lower index in the low half. */
#define FT_VEC 8
#ifdef FT_CUDA_EMULATION
#define FT_VEC_CHECK(p) \
    ((((uintptr_t)(p)) & 15u) ? cudaemu_fail("8-wide access at %p: not 16-byte aligned", (const void *)(p)) : (void)0)
#else
#define FT_VEC_CHECK(p) ((void)0)
#endif

__device__ __forceinline__ void ft_ld8(const float *p, size_t i, float v[FT_VEC])
{
    FT_VEC_CHECK(p + i);
    const float4 *q = (const float4 *)(p + i);
    float4 a = q[0], b = q[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void ft_ld8(const ft_bf16 *p, size_t i, float v[FT_VEC])
{
    FT_VEC_CHECK(p + i);
    uint4 raw = *(const uint4 *)(p + i);
    uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[2 * k] = ft_f32_from_bf16((uint16_t)w[k]);
        v[2 * k + 1] = ft_f32_from_bf16((uint16_t)(w[k] >> 16));
    }
}
__device__ __forceinline__ void ft_st8(float *p, size_t i, const float v[FT_VEC])
{
    FT_VEC_CHECK(p + i);
    float4 *q = (float4 *)(p + i);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void ft_st8(ft_bf16 *p, size_t i, const float v[FT_VEC])
{
    FT_VEC_CHECK(p + i);
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        w[k] = (uint32_t)ft_bf16_from_f32(v[2 * k]) |
               ((uint32_t)ft_bf16_from_f32(v[2 * k + 1]) << 16);
    *(uint4 *)(p + i) = make_uint4(w[0], w[1], w[2], w[3]);
}

/* v = p[i .. i+7] (8-wide load), or zeros when p is NULL: a norm backward's optional
 * base that dx adds to (backend.h, dx_base). */
template <typename T>
__device__ __forceinline__ void ft_ld8_or_zero(const T *p, size_t i, float v[FT_VEC])
{
    if (p) {
        ft_ld8(p, i, v);
        return;
    }
#pragma unroll
    for (int e = 0; e < FT_VEC; e++)
        v[e] = 0.0f;
}

/* Host side: whether every pointer given is 16-byte aligned (NULLs pass), the condition
 * for a launcher to pick a kernel's 8-wide path. */
static inline int ft_aligned16(const void *a, const void *b = 0, const void *c = 0,
                               const void *d = 0, const void *e = 0, const void *f = 0)
{
    return ((((uintptr_t)a) | ((uintptr_t)b) | ((uintptr_t)c) | ((uintptr_t)d) |
             ((uintptr_t)e) | ((uintptr_t)f)) & 15u) == 0;
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
