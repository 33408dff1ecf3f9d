/* SwiGLU gating: out = silu(g) * u, silu(g) = g * sigma(g), sigma(g) = 1/(1+e^-g).
 * Backward: du = dout * silu(g)
 *           dg = dout * u * silu'(g),  silu'(g) = sigma(g) * (1 + g * (1 - sigma(g))).
 * One thread per element (grid-stride). expf is the accurate libdevice version,
 * so results agree with the CPU backend to a few ulp (not bit-exactly: the two
 * exp implementations round differently). */
#include "cuda_common.cuh"

#define SWIGLU_THREADS 256

__global__ void swiglu_fwd_kernel(float *__restrict__ out, const float *__restrict__ gate,
                                  const float *__restrict__ up, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = gate[i];
        out[i] = g * ft_sigmoid(g) * up[i];
    }
}

__global__ void swiglu_bwd_kernel(float *__restrict__ dgate, float *__restrict__ dup,
                                  const float *__restrict__ dout, const float *__restrict__ gate,
                                  const float *__restrict__ up, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = gate[i];
        float sig = ft_sigmoid(g);
        float d = dout[i];
        dup[i] = d * (g * sig);
        dgate[i] = d * up[i] * sig * (1.0f + g * (1.0f - sig));
    }
}

extern "C" cudaError_t ft_cuda_launch_swiglu_fwd(float *out, const float *gate, const float *up,
                                                 size_t n, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(swiglu_fwd_kernel, ft_cuda_grid_for(n, SWIGLU_THREADS), SWIGLU_THREADS, 0, st)
    (out, gate, up, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_swiglu_bwd(float *dgate, float *dup, const float *dout,
                                                 const float *gate, const float *up, size_t n,
                                                 cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(swiglu_bwd_kernel, ft_cuda_grid_for(n, SWIGLU_THREADS), SWIGLU_THREADS, 0, st)(
        dgate, dup, dout, gate, up, n);
    return cudaGetLastError();
}
