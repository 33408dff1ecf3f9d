/* SwiGLU gating: out = silu(g) * u, silu(g) = g * sigma(g), sigma(g) = 1/(1+e^-g).
 * Backward: du = dout * silu(g)
 *           dg = dout * u * silu'(g),  silu'(g) = sigma(g) * (1 + g * (1 - sigma(g))).
 * Elementwise over fp32 or bf16 storage, grid-stride; where every buffer is 16-byte
 * aligned a thread takes eight elements at once (ft_ld8/ft_st8: 16-byte accesses, which
 * HBM bandwidth needs) and the last n % 8 one at a time, else one element at a time. Each
 * element's arithmetic is the same either way, so both paths give the same bits. The
 * inputs are all read before an output is written, so dgate/dup may alias gate/up and
 * the backward's optional copy of the forward's output (out) may alias dout.
 * expf is the accurate libdevice version,
 * so results agree with the CPU backend to a few ulp (not bit-exactly: the two
 * exp implementations round differently). */
#include "cuda_common.cuh"

#define SWIGLU_THREADS 256

__device__ __forceinline__ float swiglu_value(float g, float u) { return g * ft_sigmoid(g) * u; }

/* dgate and dup of one element */
__device__ __forceinline__ void swiglu_grads(float d, float g, float u, float *dg, float *du)
{
    float sig = ft_sigmoid(g);
    *du = d * (g * sig);
    *dg = d * u * sig * (1.0f + g * (1.0f - sig));
}

/* vec: every pointer is 16-byte aligned (the 8-wide path) */
template <typename T>
__global__ void swiglu_fwd_kernel(T *__restrict__ out, const T *__restrict__ gate,
                                  const T *__restrict__ up, size_t n, int vec)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t groups = vec ? n / FT_VEC : 0;
    for (size_t k = first; k < groups; k += stride) {
        float g[FT_VEC], u[FT_VEC], o[FT_VEC];
        ft_ld8(gate, k * FT_VEC, g);
        ft_ld8(up, k * FT_VEC, u);
#pragma unroll
        for (int e = 0; e < FT_VEC; e++)
            o[e] = swiglu_value(g[e], u[e]);
        ft_st8(out, k * FT_VEC, o);
    }
    for (size_t i = groups * FT_VEC + first; i < n; i += stride)
        ft_st(out, i, swiglu_value(ft_ld(gate, i), ft_ld(up, i)));
}

/* out: NULL, or the forward's output too (swiglu_value: its bits), possibly over dout */
template <typename T>
__global__ void swiglu_bwd_kernel(T *dgate, T *dup, const T *dout, const T *gate, const T *up,
                                  size_t n, int vec, T *out)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t groups = vec ? n / FT_VEC : 0;
    for (size_t k = first; k < groups; k += stride) {
        float d[FT_VEC], g[FT_VEC], u[FT_VEC], dg[FT_VEC], du[FT_VEC];
        ft_ld8(dout, k * FT_VEC, d);
        ft_ld8(gate, k * FT_VEC, g);
        ft_ld8(up, k * FT_VEC, u);
#pragma unroll
        for (int e = 0; e < FT_VEC; e++)
            swiglu_grads(d[e], g[e], u[e], &dg[e], &du[e]);
        ft_st8(dup, k * FT_VEC, du);
        ft_st8(dgate, k * FT_VEC, dg);
        if (out) {
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                d[e] = swiglu_value(g[e], u[e]);
            ft_st8(out, k * FT_VEC, d);
        }
    }
    for (size_t i = groups * FT_VEC + first; i < n; i += stride) {
        float dg, du, g = ft_ld(gate, i), u = ft_ld(up, i);
        swiglu_grads(ft_ld(dout, i), g, u, &dg, &du);
        ft_st(dup, i, du);
        ft_st(dgate, i, dg);
        if (out)
            ft_st(out, i, swiglu_value(g, u));
    }
}

extern "C" cudaError_t ft_cuda_launch_swiglu_fwd(ft_dtype dt, void *out, const void *gate,
                                                 const void *up, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    int vec = ft_aligned16(out, gate, up);
    unsigned grid = ft_cuda_grid_for(vec ? (n + FT_VEC - 1) / FT_VEC : n, SWIGLU_THREADS);
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(swiglu_fwd_kernel<T>, grid, SWIGLU_THREADS, 0, st)(
                        (T *)out, (const T *)gate, (const T *)up, n, vec));
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_swiglu_bwd(ft_dtype dt, void *dgate, void *dup,
                                                 const void *dout, const void *gate,
                                                 const void *up, size_t n, void *out,
                                                 cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    int vec = ft_aligned16(dgate, dup, dout, gate, up, out);
    unsigned grid = ft_cuda_grid_for(vec ? (n + FT_VEC - 1) / FT_VEC : n, SWIGLU_THREADS);
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(swiglu_bwd_kernel<T>, grid, SWIGLU_THREADS, 0, st)(
                        (T *)dgate, (T *)dup, (const T *)dout, (const T *)gate, (const T *)up,
                        n, vec, (T *)out));
    return cudaGetLastError();
}
