/* Moves attention statistics between ftmpi's lse layout [batch, heads, seq_len] and the
 * padded per-document layout [documents, heads, rows, 1] of the cuDNN graphs with packed
 * documents (cuda_attention_cudnn.c): document i starts at token doc_token[i] (row-major
 * over batch and seq_len) and has doc_len[i] rows. One block per (document, head). The
 * gather fills a document's rows past its length with 0 (cuDNN masks them; they are never
 * read back). */
#include "cuda_common.cuh"

#define STATS_THREADS 128

__global__ void sdpa_stats_kernel(float *__restrict__ lse, float *__restrict__ stats,
                                  const int32_t *__restrict__ doc_token,
                                  const int32_t *__restrict__ doc_len, int heads, int seq_len,
                                  int rows, int to_lse)
{
    const int doc = blockIdx.x / heads, h = blockIdx.x % heads;
    const int token = doc_token[doc], len = doc_len[doc];
    const int b = token / seq_len, start = token % seq_len;
    float *l = lse + ((size_t)b * heads + h) * seq_len + start;
    float *st = stats + ((size_t)doc * heads + h) * rows;
    for (int i = threadIdx.x; i < rows; i += blockDim.x) {
        if (to_lse) {
            if (i < len)
                l[i] = st[i];
        } else {
            st[i] = i < len ? l[i] : 0.0f;
        }
    }
}

extern "C" cudaError_t ft_cuda_launch_sdpa_stats(float *lse, float *stats, const int32_t *doc_token,
                                                 const int32_t *doc_len, int docs, int heads,
                                                 int seq_len, int rows, int to_lse,
                                                 cudaStream_t st)
{
    if (docs == 0)
        return cudaSuccess;
    FT_LAUNCH(sdpa_stats_kernel, docs * heads, STATS_THREADS, 0, st)
    (lse, stats, doc_token, doc_len, heads, seq_len, rows, to_lse);
    return cudaGetLastError();
}
