/* Token embedding lookup and its deterministic backward.
 *
 * Forward: one block per token copies its table row (coalesced).
 *
 * Backward: dtable[ids[t], :] += dout[t, :]. Several tokens may share an id, so
 * a thread per token would race; float atomics would add in a run-dependent
 * order. Instead:
 *  1. The keys (id << 32 | t) are sorted with a bitonic sort (shared-memory
 *     passes for strides below EMB_SORT_CHUNK, global passes above). The keys
 *     are unique, so the sorted order is unique too: tokens of one id end up
 *     contiguous and in token order, the same on every run.
 *  2. One block per sorted position; the block at the head of a run of equal ids
 *     (position 0 or id differs from the previous) owns that table row: it loads
 *     the row once, adds the dout rows of its run in token order, stores it.
 *     Other blocks exit at once.
 * Every table element thus receives its additions in token order, one rounding
 * each, exactly like the CPU backend: results are bit-identical to it. The sort
 * costs O(N log^2 N) compare-exchanges on N = next power of two >= tokens (at
 * least EMB_SORT_CHUNK): microseconds for thousands of tokens, about a
 * millisecond for a million. The vtable does not pass the vocabulary size,
 * which rules out schemes that partition the table; sorting needs none. (CUB's
 * radix sort would also do, but its host code pulls in libstdc++, which the C
 * link does not have.)
 * Scratch (from the caller): the N keys, see ft_cuda_embedding_bwd_scratch_bytes.
 * The table and dout are fp32 or bf16 (one template); dtable an fp32 accumulator or a
 * bf16 gradient, to which each run's fp32 sum is added once. */
#include "cuda_common.cuh"

#define EMB_THREADS 256
#define EMB_SORT_CHUNK 1024 /* elements sorted in shared memory by one block */

template <typename T>
__global__ void embedding_fwd_kernel(T *__restrict__ out, const T *__restrict__ table,
                                     const int32_t *__restrict__ ids, int dim)
{
    size_t t = blockIdx.x;
    const T *src = table + (size_t)ids[t] * dim;
    T *dst = out + t * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x)
        dst[j] = src[j]; /* a copy in either storage */
}

__global__ void embedding_keys_kernel(uint64_t *__restrict__ keys, const int32_t *__restrict__ ids,
                                      int tokens, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        keys[i] = i < (size_t)tokens ? ((uint64_t)(uint32_t)ids[i] << 32) | (uint64_t)i
                                     : ~(uint64_t)0; /* padding sorts last */
}

/* Compare-exchange of the bitonic network: the pair (element i, element i + j)
 * is put in ascending order if (i & k) == 0, descending otherwise. */
__device__ __forceinline__ void emb_cmpx(uint64_t &lo, uint64_t &hi, bool asc)
{
    if ((lo > hi) == asc) {
        uint64_t t = lo;
        lo = hi;
        hi = t;
    }
}

/* Stages k = k_first .. k_last (powers of two), strides j < EMB_SORT_CHUNK only,
 * on one chunk of EMB_SORT_CHUNK keys in shared memory; EMB_SORT_CHUNK / 2
 * threads, one pair each. Called with (2, EMB_SORT_CHUNK) to sort every chunk
 * (alternately ascending and descending, as the network wants), then with
 * (k, k) to finish stage k after its global strides. */
__global__ void embedding_sort_local_kernel(uint64_t *__restrict__ keys, size_t k_first,
                                            size_t k_last)
{
    __shared__ uint64_t sh[EMB_SORT_CHUNK];
    size_t base = (size_t)blockIdx.x * EMB_SORT_CHUNK;
    for (unsigned i = threadIdx.x; i < EMB_SORT_CHUNK; i += blockDim.x)
        sh[i] = keys[base + i];
    __syncthreads();
    for (size_t k = k_first; k <= k_last; k <<= 1) {
        unsigned j0 = k / 2 < EMB_SORT_CHUNK / 2 ? (unsigned)(k / 2) : EMB_SORT_CHUNK / 2;
        for (unsigned j = j0; j > 0; j >>= 1) {
            unsigned t = threadIdx.x;
            unsigned i = 2 * j * (t / j) + t % j; /* lower element of pair t */
            emb_cmpx(sh[i], sh[i + j], ((base + i) & k) == 0);
            __syncthreads();
        }
    }
    for (unsigned i = threadIdx.x; i < EMB_SORT_CHUNK; i += blockDim.x)
        keys[base + i] = sh[i];
}

/* One stride j >= EMB_SORT_CHUNK of stage k, one pair per thread. */
__global__ void embedding_sort_global_kernel(uint64_t *__restrict__ keys, size_t n, size_t k,
                                             size_t j)
{
    size_t pairs = n / 2, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < pairs; t += stride) {
        size_t i = 2 * j * (t / j) + t % j;
        uint64_t lo = keys[i], hi = keys[i + j];
        emb_cmpx(lo, hi, (i & k) == 0);
        keys[i] = lo;
        keys[i + j] = hi;
    }
}

/* An fp32 dtable adds each token's row in token order (the CPU's rounding, one per
 * add); a bf16 dtable gets the run's fp32 sum (from 0, in token order) added once. */
template <typename T>
__global__ void embedding_bwd_kernel(void *__restrict__ dtable, int dtable_bf16,
                                     const T *__restrict__ dout,
                                     const uint64_t *__restrict__ keys, int tokens, int dim)
{
    int p = blockIdx.x;
    uint32_t id = (uint32_t)(keys[p] >> 32);
    if (p > 0 && (uint32_t)(keys[p - 1] >> 32) == id)
        return; /* not the head of its run */
    int end = p + 1;
    while (end < tokens && (uint32_t)(keys[end] >> 32) == id)
        end++;
    const size_t row = (size_t)id * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float acc = dtable_bf16 ? 0.0f : ((float *)dtable)[row + j];
#pragma unroll 8
        for (int q = p; q < end; q++)
            acc += ft_ld(dout, (size_t)(uint32_t)keys[q] * dim + j);
        if (dtable_bf16)
            ft_grad_add(dtable, 1, row + j, acc);
        else
            ((float *)dtable)[row + j] = acc;
    }
}

static size_t emb_sort_len(int tokens)
{
    size_t n = EMB_SORT_CHUNK;
    while (n < (size_t)tokens)
        n <<= 1;
    return n;
}

extern "C" size_t ft_cuda_embedding_bwd_scratch_bytes(int tokens)
{
    return tokens <= 0 ? 0 : emb_sort_len(tokens) * sizeof(uint64_t);
}

extern "C" cudaError_t ft_cuda_launch_embedding_fwd(ft_dtype dt, void *out, const void *table,
                                                    const int32_t *ids, int tokens, int dim,
                                                    cudaStream_t st)
{
    if (tokens <= 0 || dim <= 0)
        return cudaSuccess;
    int threads = dim >= 1024 ? 256 : 128;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(embedding_fwd_kernel<T>, tokens, threads, 0, st)(
                        (T *)out, (const T *)table, ids, dim));
    return cudaGetLastError();
}

extern "C" cudaError_t ft_cuda_launch_embedding_bwd(ft_dtype dt, ft_dtype gt, void *dtable,
                                                    const void *dout, const int32_t *ids,
                                                    int tokens, int dim, void *scratch,
                                                    cudaStream_t st)
{
    if (tokens <= 0 || dim <= 0)
        return cudaSuccess;
    size_t n = emb_sort_len(tokens);
    uint64_t *keys = (uint64_t *)scratch;
    FT_LAUNCH(embedding_keys_kernel, ft_cuda_grid_for(n, EMB_THREADS), EMB_THREADS, 0, st)
    (keys, ids, tokens, n);
    unsigned chunks = (unsigned)(n / EMB_SORT_CHUNK);
    FT_LAUNCH(embedding_sort_local_kernel, chunks, EMB_SORT_CHUNK / 2, 0, st)
    (keys, 2, EMB_SORT_CHUNK);
    for (size_t k = 2 * EMB_SORT_CHUNK; k <= n; k <<= 1) {
        for (size_t j = k / 2; j >= EMB_SORT_CHUNK; j >>= 1)
            FT_LAUNCH(embedding_sort_global_kernel, ft_cuda_grid_for(n / 2, EMB_THREADS),
                      EMB_THREADS, 0, st)
            (keys, n, k, j);
        FT_LAUNCH(embedding_sort_local_kernel, chunks, EMB_SORT_CHUNK / 2, 0, st)(keys, k, k);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    int threads = dim >= 1024 ? 256 : 128;
    FT_WITH_STORAGE(dt, T,
                    FT_LAUNCH(embedding_bwd_kernel<T>, tokens, threads, 0, st)(
                        dtable, gt == FT_DTYPE_BF16 ? 1 : 0, (const T *)dout, keys, tokens, dim));
    return cudaGetLastError();
}
