/* Cross-entropy fused with its gradient, one block per row of logits.
 * With z the row's logits, t the target and w the row weight (1 if weight is
 * NULL):
 *   lse      = log(sum_j exp(z_j))  (stable: relative to the running max)
 *   loss     = w * (lse - z_t)
 *   dlogit_j = w * grad_scale * (exp(z_j - lse) - [j == t])
 * dlogits are stored as T: fp32 (in place over z when the caller passes the logits) or
 * bf16, the fp32 value rounded once (ft_st), so bf16 dlogits are the bits a cast of the
 * fp32 ones would give.
 * Rows with w == 0 get zero loss and zero gradient; their target is not read.
 *
 * Pass 1 (online logsumexp): each thread walks its strided elements keeping a
 * running max m and sum s of exp(z - m), rescaling s when m grows; then the
 * block combines the (m, s) pairs: M = max m, S = sum s * exp(m - M) in double
 * (a row has up to ~10^5 terms). Pass 2 writes the gradient. Both passes read
 * the row (from L2 for the second); the reduction shape is fixed, so results
 * are reproducible. */
#include "cuda_common.cuh"

#include <math.h>

/* logits and dlogits may be the same fp32 buffer: no __restrict__ on them */
template <typename T>
__global__ void cross_entropy_kernel(const float *logits, T *dlogits, float *__restrict__ row_loss,
                                     const int32_t *__restrict__ targets,
                                     const float *__restrict__ weight, int vocab, float grad_scale)
{
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t r = blockIdx.x;
    const float *z = logits + r * vocab;
    T *out = dlogits + r * vocab;
    float w = weight ? weight[r] : 1.0f;
    if (w == 0.0f) {
        for (int j = threadIdx.x; j < vocab; j += blockDim.x)
            ft_st(out, j, 0.0f);
        if (threadIdx.x == 0)
            row_loss[r] = 0.0f;
        return;
    }
    int t = targets[r];
    float zt = z[t]; /* read before anyone overwrites the row (after the barriers below) */

    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float x = z[j];
        if (x > m) {
            s = s * expf(m - x) + 1.0f; /* m = -inf at first: expf(-inf) = 0 */
            m = x;
        } else if (x != -INFINITY) { /* -inf - -inf would be NaN */
            s += expf(x - m);
        }
    }
    float M = ft_block_max(m, redf);
    double part = m == -INFINITY ? 0.0 : (double)s * (double)expf(m - M);
    double S = ft_block_sum(part, redd);
    float lse = (float)((double)M + log(S));
    if (threadIdx.x == 0)
        row_loss[r] = w * (lse - zt);
    float coef = w * grad_scale;
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
        float g = coef * expf(z[j] - lse);
        ft_st(out, j, j == t ? g - coef : g);
    }
}

extern "C" cudaError_t ft_cuda_launch_cross_entropy(const float *logits, void *dlogits,
                                                    ft_dtype dt, float *row_loss,
                                                    const int32_t *targets, const float *weight,
                                                    int rows, int vocab, float grad_scale,
                                                    cudaStream_t st)
{
    if (rows <= 0 || vocab <= 0)
        return cudaSuccess;
    int threads = vocab >= 16384 ? 1024 : vocab >= 2048 ? 512 : 128;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(cross_entropy_kernel<T>, rows, threads, 0, st)(
                        logits, (T *)dlogits, row_loss, targets, weight, vocab, grad_scale));
    return cudaGetLastError();
}
