/* GELU, the two forms of Hugging Face configs (ft_gelu_kind):
 *   erf  ("gelu"):     gelu(x) = x Phi(x),  Phi(x) = 0.5 (1 + erf(x / sqrt 2))
 *                      gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2) / sqrt(2 pi)
 *   tanh ("gelu_new"): u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715, t = tanh(u)
 *                      gelu(x) = 0.5 x (1 + t)
 *                      gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
 * One thread per element (grid-stride), over fp32 or bf16 storage; the kind is a
 * template parameter, so no branch per element. erfcf and expf are the accurate
 * libdevice versions; results agree with the CPU backend (its own vectorisable erf and
 * tanh) to a few ulp, not bit for bit. gelu_bwd reads dout[i] before writing dx[i], so
 * dx may be dout's buffer. */
#include "cuda_common.cuh"

#include <math.h>

#define GELU_THREADS 256
#define GELU_INV_SQRT2 0.70710678118654752f
#define GELU_INV_SQRT_2PI 0.39894228040143268f
#define GELU_TANH_K 0.79788456080286536f /* sqrt(2/pi) */
#define GELU_TANH_C 0.044715f

/* 1 + tanh(u) and 1 - tanh(u) from e = exp(-2|u|) in [0, 1]: 2/(1+e) on u's side,
 * 2e/(1+e) on the other. They keep their relative accuracy where tanh -> +-1, as
 * 1 + erf(z) = erfc(-z) does for the erf form: the far negative tails of gelu and
 * gelu' do not cancel (the CPU backend computes the same forms). */
__device__ __forceinline__ void tanh_parts(float u, float *one_plus_t, float *one_minus_t)
{
    float e = expf(-2.0f * fabsf(u));
    float r = 1.0f / (1.0f + e);
    float big = 2.0f * r, small = 2.0f * e * r;
    *one_plus_t = u >= 0.0f ? big : small;
    *one_minus_t = u >= 0.0f ? small : big;
}

template <int KIND>
__device__ __forceinline__ float gelu_value(float v)
{
    if (KIND == FT_GELU_TANH) {
        float opt, omt;
        tanh_parts(GELU_TANH_K * (v + GELU_TANH_C * v * v * v), &opt, &omt);
        return 0.5f * v * opt;
    }
    return 0.5f * v * erfcf(-v * GELU_INV_SQRT2);
}

template <int KIND>
__device__ __forceinline__ float gelu_slope(float v)
{
    if (KIND == FT_GELU_TANH) {
        float opt, omt;
        tanh_parts(GELU_TANH_K * (v + GELU_TANH_C * v * v * v), &opt, &omt);
        float du = GELU_TANH_K * (1.0f + 3.0f * GELU_TANH_C * v * v);
        return 0.5f * opt + 0.5f * v * (opt * omt) * du; /* (1+t)(1-t) = 1 - t^2 */
    }
    float cdf = 0.5f * erfcf(-v * GELU_INV_SQRT2);
    return cdf + v * (GELU_INV_SQRT_2PI * expf(-0.5f * v * v));
}

template <typename T, int KIND>
__global__ void gelu_fwd_kernel(T *__restrict__ out, const T *__restrict__ x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        ft_st(out, i, gelu_value<KIND>(ft_ld(x, i)));
}

/* dx and dout may alias: no __restrict__ on them */
template <typename T, int KIND>
__global__ void gelu_bwd_kernel(T *dx, const T *dout, const T *__restrict__ x, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        ft_st(dx, i, ft_ld(dout, i) * gelu_slope<KIND>(ft_ld(x, i)));
}

/* The kernels of one storage T, the kind chosen once per launch. */
template <typename T>
static void launch_gelu_fwd(ft_gelu_kind kind, T *out, const T *x, size_t n, cudaStream_t st)
{
    void (*kernel)(T *, const T *, size_t) =
        kind == FT_GELU_TANH ? gelu_fwd_kernel<T, FT_GELU_TANH> : gelu_fwd_kernel<T, FT_GELU_ERF>;
    FT_LAUNCH(kernel, ft_cuda_grid_for(n, GELU_THREADS), GELU_THREADS, 0, st)(out, x, n);
}

template <typename T>
static void launch_gelu_bwd(ft_gelu_kind kind, T *dx, const T *dout, const T *x, size_t n,
                            cudaStream_t st)
{
    void (*kernel)(T *, const T *, const T *, size_t) =
        kind == FT_GELU_TANH ? gelu_bwd_kernel<T, FT_GELU_TANH> : gelu_bwd_kernel<T, FT_GELU_ERF>;
    FT_LAUNCH(kernel, ft_cuda_grid_for(n, GELU_THREADS), GELU_THREADS, 0, st)(dx, dout, x, n);
}

extern "C" cudaError_t ft_cuda_launch_gelu_fwd(ft_dtype dt, ft_gelu_kind kind, void *out,
                                               const void *x, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T, launch_gelu_fwd(kind, (T *)out, (const T *)x, n, st));
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_gelu_bwd(ft_dtype dt, ft_gelu_kind kind, void *dx,
                                               const void *dout, const void *x, size_t n,
                                               cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    launch_gelu_bwd(kind, (T *)dx, (const T *)dout, (const T *)x, n, st));
    return cudaGetLastError();
}
