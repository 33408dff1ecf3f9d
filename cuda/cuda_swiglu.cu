/* SwiGLU gating: out = silu(g) * u, silu(g) = g * sigma(g), sigma(g) = 1/(1+e^-g).
 * Backward: du = dout * silu(g)
 *           dg = dout * u * silu'(g),  silu'(g) = sigma(g) * (1 + g * (1 - sigma(g))).
 * One thread per element (grid-stride), over fp32 or bf16 storage (the inputs are
 * all read before an output is written, so dgate/dup may alias gate/up).
 * expf is the accurate libdevice version,
 * so results agree with the CPU backend to a few ulp (not bit-exactly: the two
 * exp implementations round differently). */
#include "cuda_common.cuh"

#define SWIGLU_THREADS 256

template <typename T>
__global__ void swiglu_fwd_kernel(T *__restrict__ out, const T *__restrict__ gate,
                                  const T *__restrict__ up, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = ft_ld(gate, i);
        ft_st(out, i, g * ft_sigmoid(g) * ft_ld(up, i));
    }
}

template <typename T>
__global__ void swiglu_bwd_kernel(T *__restrict__ dgate, T *__restrict__ dup,
                                  const T *__restrict__ dout, const T *__restrict__ gate,
                                  const T *__restrict__ up, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = ft_ld(gate, i);
        float sig = ft_sigmoid(g);
        float d = ft_ld(dout, i);
        float u = ft_ld(up, i);
        ft_st(dup, i, d * (g * sig));
        ft_st(dgate, i, d * u * sig * (1.0f + g * (1.0f - sig)));
    }
}

extern "C" cudaError_t ft_cuda_launch_swiglu_fwd(ft_dtype dt, void *out, const void *gate,
                                                 const void *up, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(swiglu_fwd_kernel<T>, ft_cuda_grid_for(n, SWIGLU_THREADS),
                              SWIGLU_THREADS, 0, st)((T *)out, (const T *)gate, (const T *)up, n));
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_swiglu_bwd(ft_dtype dt, void *dgate, void *dup,
                                                 const void *dout, const void *gate,
                                                 const void *up, size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(swiglu_bwd_kernel<T>, ft_cuda_grid_for(n, SWIGLU_THREADS),
                              SWIGLU_THREADS, 0, st)((T *)dgate, (T *)dup, (const T *)dout,
                                                     (const T *)gate, (const T *)up, n));
    return cudaGetLastError();
}
