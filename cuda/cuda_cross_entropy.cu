/* Cross-entropy fused with its gradient, one block per row of logits.
 * With z the row's logits, t the target and w the row weight (1 if weight is
 * NULL):
 *   lse      = log(sum_j exp(z_j))  (stable: relative to the running max)
 *   loss     = w * (lse - z_t)
 *   dlogit_j = w * grad_scale * (exp(z_j - lse) - [j == t])
 * The logits are read as LT, fp32 or bf16 (the bf16 recipe's head: widened exactly on
 * load, the arithmetic fp32 either way). dlogits are stored as T: fp32 or bf16, the fp32
 * value rounded once (ft_st), so bf16 dlogits are the bits a cast of the fp32 ones would
 * give; in place over the logits when LT is T and the caller passes the same buffer.
 * Rows with w == 0 get zero loss and zero gradient; their target is not read.
 *
 * Pass 1 (online logsumexp): each thread walks its strided elements keeping a
 * running max m and sum s of exp(z - m), rescaling s when m grows; then the
 * block combines the (m, s) pairs: M = max m, S = sum s * exp(m - M) in double
 * (a row has up to ~10^5 terms). Pass 2 writes the gradient, walking the row from
 * its end. Both passes read the row; the second finds in L2 what is still there (a
 * row of 128256 bf16 logits is 250 KiB: two blocks an SM on 132 SMs hold 66 MB of
 * rows in flight against an H100's 50 MB of L2, fp32 twice that), most likely the
 * row's end, read last. The reduction shape is fixed, so results are reproducible.
 * Where the vocabulary is a multiple of 8 and the buffers 16-byte aligned (vec), a
 * thread takes 8 consecutive logits at a time (ft_ld8/ft_st8: the 16-byte accesses HBM
 * bandwidth needs; the 1B model's 4096 x 128256 bf16 logits are 1.05 GB a pass), else
 * one; the choice depends on shapes and pointers only. */
#include "cuda_common.cuh"

#include <math.h>

/* one logit into a thread's running (max m, sum s of exp(z - m)) */
__device__ __forceinline__ void lse_add(float x, float *m, float *s)
{
    if (x > *m) {
        *s = *s * expf(*m - x) + 1.0f; /* m = -inf at first: expf(-inf) = 0 */
        *m = x;
    } else if (x != -INFINITY) { /* -inf - -inf would be NaN */
        *s += expf(x - *m);
    }
}

/* the gradient of one logit x: coef * softmax(x), less coef at the target */
__device__ __forceinline__ float dlogit(float x, float lse, float coef, bool target)
{
    float g = coef * expf(x - lse);
    return target ? g - coef : g;
}

/* logits and dlogits may be the same buffer (LT = T): no __restrict__ on them */
template <typename LT, typename T>
__global__ void cross_entropy_kernel(const LT *logits, T *dlogits, float *__restrict__ row_loss,
                                     const int32_t *__restrict__ targets,
                                     const float *__restrict__ weight, int vocab, float grad_scale,
                                     int vec)
{
    __shared__ float redf[32];
    __shared__ double redd[32];
    size_t r = blockIdx.x;
    const LT *z = logits + r * vocab;
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
    float zt = ft_ld(z, t); /* read before anyone overwrites the row (after the barriers below) */

    float m = -INFINITY, s = 0.0f;
    if (vec) {
        for (int j = threadIdx.x * FT_VEC; j < vocab; j += blockDim.x * FT_VEC) {
            float x[FT_VEC];
            ft_ld8(z, j, x);
#pragma unroll
            for (int e = 0; e < FT_VEC; e++)
                lse_add(x[e], &m, &s);
        }
    } else {
        for (int j = threadIdx.x; j < vocab; j += blockDim.x)
            lse_add(ft_ld(z, j), &m, &s);
    }
    float M = ft_block_max(m, redf);
    double part = m == -INFINITY ? 0.0 : (double)s * (double)expf(m - M);
    double S = ft_block_sum(part, redd);
    float lse = (float)((double)M + log(S));
    if (threadIdx.x == 0)
        row_loss[r] = w * (lse - zt);
    float coef = w * grad_scale;
    /* Pass 2 walks the row backwards: its end, which pass 1 read last, is what L2 most
     * likely still holds when the rows in flight outgrow it (each element's gradient is
     * its own, so the order changes no bit). */
    const int width = vec ? FT_VEC : 1, stride = blockDim.x * width, j0 = threadIdx.x * width;
    if (j0 < vocab) {
        for (int j = j0 + (vocab - 1 - j0) / stride * stride; j >= j0; j -= stride) {
            if (vec) {
                float x[FT_VEC];
                ft_ld8(z, j, x);
#pragma unroll
                for (int e = 0; e < FT_VEC; e++)
                    x[e] = dlogit(x[e], lse, coef, j + e == t);
                ft_st8(out, j, x);
            } else {
                ft_st(out, j, dlogit(ft_ld(z, j), lse, coef, j == t));
            }
        }
    }
}

/* One launch: one block per row (the logits stored as LT, the dlogits as T). */
template <typename LT, typename T>
static void cross_entropy_run(const void *logits, void *dlogits, float *row_loss,
                              const int32_t *targets, const float *weight, int rows, int vocab,
                              float grad_scale, cudaStream_t st)
{
    const int threads = vocab >= 16384 ? 1024 : vocab >= 2048 ? 512 : 128;
    const int vec = vocab % FT_VEC == 0 && ft_aligned16(logits, dlogits);
    void (*kern)(const LT *, T *, float *, const int32_t *, const float *, int, float, int) =
        cross_entropy_kernel<LT, T>;
    FT_LAUNCH(kern, rows, threads, 0, st)((const LT *)logits, (T *)dlogits, row_loss, targets,
                                          weight, vocab, grad_scale, vec);
}

extern "C" cudaError_t ft_cuda_launch_cross_entropy(const void *logits, ft_dtype lt,
                                                    void *dlogits, ft_dtype dt, float *row_loss,
                                                    const int32_t *targets, const float *weight,
                                                    int rows, int vocab, float grad_scale,
                                                    cudaStream_t st)
{
    if (rows <= 0 || vocab <= 0)
        return cudaSuccess;
    if (lt == FT_DTYPE_BF16)
        FT_WITH_STORAGE(dt, T,
                        cross_entropy_run<ft_bf16, T>(logits, dlogits, row_loss, targets, weight,
                                                      rows, vocab, grad_scale, st));
    else
        FT_WITH_STORAGE(dt, T,
                        cross_entropy_run<float, T>(logits, dlogits, row_loss, targets, weight,
                                                    rows, vocab, grad_scale, st));
    return cudaGetLastError();
}
