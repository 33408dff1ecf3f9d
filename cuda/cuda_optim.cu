/* Optimiser steps over flat fp32 buffers, one thread per element.
 *
 * AdamW follows torch.optim.AdamW (single-tensor path) operation by operation;
 * the scalar coefficients come from the host (formed in double, rounded to fp32
 * where PyTorch hands them to a float kernel, see cuda_backend.c):
 *   p   = p * (1 - lr*wd)                    decoupled weight decay, first
 *   m   = m + (1-b1) * (g - m)               exp_avg.lerp_(g, 1-b1)
 *   v   = v * b2 + ((1-b2) * g) * g          exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
 *   den = sqrt(v) / sqrt(1-b2^t) + eps
 *   p   = p + ((-lr/(1-b1^t)) * m) / den
 * where g is the stored gradient times grad_scale (clipping's multiplier, rounded to fp32
 * as a separate scaling pass would have stored it).
 * Every product and sum is written with an explicit round-to-nearest intrinsic
 * (__fmul_rn, __fadd_rn: never contracted into an FMA), sqrtf and '/' are the
 * IEEE-rounded versions (nvcc's default -prec-sqrt/-prec-div), so the result is
 * bit-identical to the CPU backend, which rounds after every operation too.
 *
 * SGD (dampening 0, no Nesterov) with decoupled weight decay:
 *   buf = mu * buf + g;  p = p * (1 - lr*wd) - lr * buf   (buf unused when mu == 0),
 * g likewise the stored gradient times grad_scale. */
#include "cuda_common.cuh"

#define OPT_THREADS 256

/* One element's update (the formulas above) of parameter p0 from moments m0, v0 with the
 * gradient g_raw x c.grad_scale and decay factor `decay` (c.decay, or 1 where exempt);
 * writes the new moments to *m, *v and returns the new parameter. */
__device__ __forceinline__ float adamw_value(const ft_cuda_adamw_coef &c, float decay, float p0,
                                             float g_raw, float m0, float v0, float *m, float *v)
{
    float g = __fmul_rn(g_raw, c.grad_scale);
    float pi = __fmul_rn(p0, decay);
    float mi = __fadd_rn(m0, __fmul_rn(c.w1, __fsub_rn(g, m0)));
    float vi = __fadd_rn(__fmul_rn(v0, c.beta2), __fmul_rn(__fmul_rn(c.w2, g), g));
    float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bc2_sqrt), c.eps);
    *m = mi;
    *v = vi;
    return __fadd_rn(pi, __fdiv_rn(__fmul_rn(c.neg_step, mi), den));
}

/* bits (may be NULL): the updated parameter rounded to bf16 as well, so the bf16
 * working copy costs no second read of the fp32 master. Elements from c.decay_n on are
 * exempt from weight decay (factor 1: p * 1 is p, the bits of weight_decay 0). */
__global__ void adamw_kernel(float *__restrict__ param, const float *__restrict__ grad,
                             float *__restrict__ m, float *__restrict__ v,
                             uint16_t *__restrict__ bits, size_t n, ft_cuda_adamw_coef c)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float mi, vi;
        float pn = adamw_value(c, i < c.decay_n ? c.decay : 1.0f, param[i], grad[i], m[i], v[i],
                               &mi, &vi);
        param[i] = pn;
        m[i] = mi;
        v[i] = vi;
        if (bits)
            bits[i] = ft_bf16_from_f32(pn);
    }
}

/* adamw_kernel's bits for rows[k] of a [*, row_len] matrix into out[k], nothing else
 * written: blocks (x, y) cover stretches of rows y, y + gridDim.y, ... zero: the moments
 * are taken as +0 unread (the first update; reading stored zeros gives the same bits). */
__global__ void adamw_rows_bf16_kernel(uint16_t *__restrict__ out, const float *__restrict__ param,
                                       const float *__restrict__ grad, const float *__restrict__ m,
                                       const float *__restrict__ v, const int32_t *__restrict__ rows,
                                       size_t n_rows, size_t row_len, ft_cuda_adamw_coef c, int zero)
{
    for (size_t k = blockIdx.y; k < n_rows; k += gridDim.y) {
        const size_t base = (size_t)rows[k] * row_len;
        for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < row_len;
             j += (size_t)gridDim.x * blockDim.x) {
            const size_t i = base + j;
            float mi, vi;
            float pn = adamw_value(c, i < c.decay_n ? c.decay : 1.0f, param[i], grad[i],
                                   zero ? 0.0f : m[i], zero ? 0.0f : v[i], &mi, &vi);
            out[k * row_len + j] = ft_bf16_from_f32(pn);
        }
    }
}

__global__ void sgd_plain_kernel(float *__restrict__ param, const float *__restrict__ grad,
                                 size_t n, float decay, float lr, float gs)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        param[i] = __fsub_rn(__fmul_rn(param[i], decay), __fmul_rn(lr, __fmul_rn(grad[i], gs)));
}

__global__ void sgd_momentum_kernel(float *__restrict__ param, const float *__restrict__ grad,
                                    float *__restrict__ buf, size_t n, float decay, float lr,
                                    float mu, float gs)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float b = __fadd_rn(__fmul_rn(mu, buf[i]), __fmul_rn(grad[i], gs));
        buf[i] = b;
        param[i] = __fsub_rn(__fmul_rn(param[i], decay), __fmul_rn(lr, b));
    }
}

extern "C" cudaError_t ft_cuda_launch_adamw(float *param, const float *grad, float *m, float *v,
                                            uint16_t *bits, size_t n, ft_cuda_adamw_coef c,
                                            cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    FT_LAUNCH(adamw_kernel, ft_cuda_grid_for(n, OPT_THREADS), OPT_THREADS, 0, st)
    (param, grad, m, v, bits, n, c);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_adamw_rows_bf16(uint16_t *out, const float *param,
                                                      const float *grad, const float *m,
                                                      const float *v, const int32_t *rows,
                                                      size_t n_rows, size_t row_len,
                                                      ft_cuda_adamw_coef c, int moments_zero,
                                                      cudaStream_t st)
{
    if (n_rows == 0 || row_len == 0)
        return cudaSuccess;
    const size_t per_row = (row_len + OPT_THREADS - 1) / OPT_THREADS;
    const dim3 grid((unsigned)(per_row < 8 ? per_row : 8),
                    (unsigned)(n_rows < 65535 ? n_rows : 65535)); /* gridDim.y's bound */
    FT_LAUNCH(adamw_rows_bf16_kernel, grid, OPT_THREADS, 0, st)
    (out, param, grad, m, v, rows, n_rows, row_len, c, moments_zero);
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_sgd(float *param, const float *grad, float *momentum_buf,
                                          size_t n, float decay, float lr, float mu,
                                          float grad_scale, cudaStream_t st)
{
    if (n == 0)
        return cudaSuccess;
    unsigned grid = ft_cuda_grid_for(n, OPT_THREADS);
    if (mu == 0.0f || !momentum_buf)
        FT_LAUNCH(sgd_plain_kernel, grid, OPT_THREADS, 0, st)
        (param, grad, n, decay, lr, grad_scale);
    else
        FT_LAUNCH(sgd_momentum_kernel, grid, OPT_THREADS, 0, st)
        (param, grad, momentum_buf, n, decay, lr, mu, grad_scale);
    return cudaGetLastError();
}
