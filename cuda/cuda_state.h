/* State of the CUDA backend, for its host C files (cuda_backend.c, cuda_matmul.c).
 * The kernel files (.cu) do not include this header. */
#ifndef FT_CUDA_STATE_H
#define FT_CUDA_STATE_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "cuda_internal.h"
#include "cuda_attention_cudnn.h"
#include "cuda_lanes.h"
#include "cuda_phase_time.h"
#include "cuda_segment_hint.h"
#include "cuda_upload_stage.h"

/* cuBLASLt workspace: 32 MiB is what NVIDIA recommends for Hopper (split-K and
 * stream-K algorithms need it); Ampere needs less. */
#define FT_CUDA_LT_WORKSPACE ((size_t)32 << 20)
#define FT_CUDA_MM_PLANS 64
#define FT_CUDA_DOWNLOAD_STAGE ((size_t)64 << 10)

/* A cached matmul configuration: descriptors and the algorithm the heuristic
 * picked for one shape, transposition and operand alignment. */
typedef struct ft_cuda_mm_plan {
    int m, n, k;
    int trans_a, trans_b;
    ft_gemm_types types;
    unsigned align_a, align_b, align_c; /* bytes, powers of two <= 256 */
    /* matmul_pair's strided batch: batch 2 and each operand's second matrix at this many
     * elements from its first (0: shared); batch 1 for a single matmul */
    int batch;
    int64_t stride_a, stride_b, stride_c;
    int no_algo; /* batch 2 only: cuBLASLt offered no algorithm, the pair runs as two */
    int valid;
    unsigned long last_use;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLAS operands: la = our b, lb = our a */
    cublasLtMatmulAlgo_t algo;
} ft_cuda_mm_plan;

/* Allocation table: device pointer -> requested bytes (open addressing, linear
 * probing; key 0 = empty, 1 = deleted). */
typedef struct ft_cuda_alloc_table {
    uintptr_t *keys;
    size_t *bytes;
    size_t cap;  /* power of two */
    size_t used; /* live + deleted slots */
    size_t live;
} ft_cuda_alloc_table;

typedef struct ft_cuda_state {
    cudaStream_t stream; /* the current lane's: lanes.main, or lanes.side between fork and join */
    ft_cuda_lanes lanes;
    int use_pool;        /* stream-ordered allocator (cudaMallocAsync) available */
    cudaMemPool_t pool;  /* the device's default pool, when use_pool */
    cublasLtHandle_t lt;
    void *lt_workspace;
    ft_cuda_mm_plan plans[FT_CUDA_MM_PLANS];
    unsigned long mm_clock;
    int pair_fallback_told; /* matmul_pair's notice that a batch fell back, said once */
    void *scratch;
    size_t scratch_bytes;
    double *host_result; /* pinned, for sum_squares and sum_squares_each */
    void *download_stage; /* pinned, FT_CUDA_DOWNLOAD_STAGE bytes: small downloads land here */
    int host_results;    /* how many doubles host_result holds */
    ft_cuda_alloc_table table;
    ft_cudnn_attn *cudnn; /* cuDNN attention: handle and plans (cuda_attention_cudnn.c) */
    ft_segment_hint segment_hint; /* host copy of the model's segment ids (segment_hint op) */
    ft_cuda_phase_times phases;   /* step-phase timing (cuda_phase_time.c) */
    ft_upload_stage upload_stage; /* pinned staging of small uploads (cuda_upload_stage.c) */
} ft_cuda_state;

static inline ft_cuda_state *ft_cuda_state_of(const ft_backend *be)
{
    return (ft_cuda_state *)be->impl;
}

/* cuda_matmul.c */
void ft_cuda_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b, int m,
                    int n, int k, bool trans_a, bool trans_b, float alpha, float beta);
void ft_cuda_matmul_pair(ft_backend *be, ft_gemm_types t, void *c0, void *c1, const void *a0,
                         const void *a1, const void *b0, const void *b1, int m, int n, int k,
                         bool trans_a, bool trans_b, float alpha, float beta);
void ft_cuda_matmul_add(ft_backend *be, ft_gemm_types t, void *d, const void *c, const void *a,
                        const void *b, int m, int n, int k, bool trans_a, bool trans_b);
void ft_cuda_matmul_release(ft_cuda_state *st);

/* cuda_attention_route.c: the vtable's attention entries (which kernels a call takes) */
void ft_cuda_check_attention_shape(ft_attn_shape s, const char *op);
void ft_cuda_attention_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse, const void *q,
                           const void *k, const void *v, const int32_t *segment, ft_attn_shape s);
void ft_cuda_attention_bwd(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                           const void *dout, const void *out, const float *lse, const void *q,
                           const void *k, const void *v, const int32_t *segment, ft_attn_shape s);
void ft_cuda_attention_decode(ft_backend *be, ft_dtype dt, void *out, const void *q,
                              const void *k_cache, const void *v_cache, int past, int n_new,
                              int n_heads, int n_kv_heads, int head_dim, int window);

#endif
