/* Private declarations of the CUDA backend, shared by the host C file
 * (cuda_backend.c, compiled by mpicc) and the kernel files (cuda_*.cu, compiled
 * by nvcc as C++). Nothing outside cuda/ includes this header.
 *
 * Split of the work
 *  - cuda_backend.c owns the backend state (stream, cuBLASLt handle, workspace,
 *    allocation table), the memory ops, matmul (cuBLASLt) and the vtable. Its
 *    wrappers validate sizes and call the launchers below.
 *  - Each cuda_<family>.cu file holds the kernels of one family and exposes
 *    `extern "C"` launchers: plain C functions that take device pointers and the
 *    stream, enqueue the kernels and return without synchronising. A launcher
 *    returns the launch status (cudaGetLastError after its last launch); the
 *    caller turns a failure into a fatal message, since the vtable has no error
 *    path and a failed launch means a broken invariant, not a user error.
 *  - Launchers that need temporary device memory receive it from the caller
 *    (ft_cuda_scratch), sized with the matching *_scratch_bytes function, so the
 *    kernels never allocate and the stream stays the only ordering mechanism.
 *  - cuda_matmul.c (host C) drives cuBLASLt; cuda_state.h holds the state.
 *
 * The kernel files do not use the C++ standard library, exceptions or RTTI, so
 * their objects link with the C driver (mpicc) and need no libstdc++. */
#ifndef FT_CUDA_INTERNAL_H
#define FT_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- cuda_backend.c: helpers for the other host files ---- */

/* Device scratch memory of at least `bytes`, valid until the next call on the
 * same backend (the buffer grows stream-ordered; contents are not preserved).
 * Aborts with a message if the device is out of memory. */
void *ft_cuda_scratch(ft_backend *be, size_t bytes);
cudaStream_t ft_cuda_stream(const ft_backend *be);
/* Aborts with "ftmpi: CUDA backend: <what>: <cuda error string>" unless st is cudaSuccess. */
void ft_cuda_check(cudaError_t st, const char *what);

/* ---- cuda_host_copy.c: backend.h's host_alloc, host_free, upload_async, download_async ---- */
void *ft_cuda_host_alloc(ft_backend *be, size_t bytes);
void ft_cuda_host_free(ft_backend *be, void *p);
void ft_cuda_upload_async(ft_backend *be, void *dst, const void *src_host, size_t bytes);
void ft_cuda_download_async(ft_backend *be, void *dst_host, const void *src, size_t bytes);

/* ---- cuda_elementwise.cu ---- */
cudaError_t ft_cuda_launch_add(float *y, const float *x, size_t n, cudaStream_t st);
cudaError_t ft_cuda_launch_scale(float *x, float s, size_t n, cudaStream_t st);
/* x = beta == 0 ? 0 : beta * x (matmul with an empty inner dimension); x stored as dt. */
cudaError_t ft_cuda_launch_beta_scale(void *x, ft_dtype dt, float beta, size_t n,
                                      cudaStream_t st);

/* ---- cuda_swiglu.cu ---- */
cudaError_t ft_cuda_launch_swiglu_fwd(ft_dtype dt, void *out, const void *gate, const void *up,
                                      size_t n, cudaStream_t st);
cudaError_t ft_cuda_launch_swiglu_bwd(ft_dtype dt, void *dgate, void *dup, const void *dout,
                                      const void *gate, const void *up, size_t n, void *out,
                                      cudaStream_t st);

/* ---- cuda_dropout.cu ---- */
cudaError_t ft_cuda_launch_dropout(ft_dtype dt, void *y, const void *x, int rows, int cols,
                                   ft_dropout_mask m, bool accumulate, cudaStream_t st);

/* ---- cuda_cast.cu ---- */
cudaError_t ft_cuda_launch_f32_to_bf16(uint16_t *dst, const float *src, size_t n, cudaStream_t st);
cudaError_t ft_cuda_launch_bf16_to_f32(float *dst, const uint16_t *src, size_t n, cudaStream_t st);

/* ---- cuda_optim.cu ----
 * Scalar coefficients are formed on the host (in double, like PyTorch) and
 * passed rounded to fp32; see cuda_optim.cu for the formulas. */
typedef struct ft_cuda_adamw_coef {
    float decay;     /* 1 - lr*wd */
    float w1;        /* 1 - beta1 */
    float beta2;
    float w2;        /* 1 - beta2 */
    float neg_step;  /* -lr / (1 - beta1^t) */
    float bc2_sqrt;  /* sqrt(1 - beta2^t) */
    float eps;
    float grad_scale; /* the gradient used is grad x grad_scale (clipping) */
    size_t decay_n;   /* elements [0, decay_n) decay; the rest use factor 1 */
} ft_cuda_adamw_coef;
cudaError_t ft_cuda_launch_adamw(float *param, const float *grad, float *m, float *v,
                                 uint16_t *bits, size_t n, ft_cuda_adamw_coef c, cudaStream_t st);
/* adamw's bits for rows[0..n_rows) of a [*, row_len] matrix into out, nothing else
 * written; c.decay_n as for adamw, moments_zero: m and v taken as +0 unread. */
cudaError_t ft_cuda_launch_adamw_rows_bf16(uint16_t *out, const float *param, const float *grad,
                                           const float *m, const float *v, const int32_t *rows,
                                           size_t n_rows, size_t row_len, ft_cuda_adamw_coef c,
                                           int moments_zero, cudaStream_t st);
/* momentum_buf may be NULL when mu == 0. */
cudaError_t ft_cuda_launch_sgd(float *param, const float *grad, float *momentum_buf, size_t n,
                               float decay, float lr, float mu, float grad_scale,
                               cudaStream_t st);

/* ---- cuda_normal.cu (the host side: cuda_normal_fill.c) ----
 * dst[i] = std * normal(key, first + i) rounded to float by util/rng_normal_math.h; the
 * index i of each value it cannot vouch for goes to unsure[atomicAdd(n_unsure)] while
 * the slot is below cap (*n_unsure counts them all: zero it first). */
cudaError_t ft_cuda_launch_normal_fill(float *dst, size_t n, uint64_t key, uint64_t first,
                                       double std, unsigned *n_unsure, uint32_t *unsure,
                                       unsigned cap, cudaStream_t st);
/* dst[idx[k]] = val[k] for k < count */
cudaError_t ft_cuda_launch_scatter_f32(float *dst, const uint32_t *idx, const float *val,
                                       unsigned count, cudaStream_t st);
void ft_cuda_normal_fill(ft_backend *be, float *dst, size_t n, uint64_t seed, uint64_t stream,
                         uint64_t first, double std);

/* ---- cuda_reduce.cu ---- */
size_t ft_cuda_sum_squares_scratch_bytes(size_t n);
/* Writes sum x^2 (fp64) to *result_dev (device memory, may lie inside scratch's
 * tail: it is a separate argument). */
cudaError_t ft_cuda_launch_sum_squares(double *result_dev, const float *x, size_t n,
                                       void *scratch, cudaStream_t st);

/* ---- cuda_rmsnorm.cu ---- */
cudaError_t ft_cuda_launch_rmsnorm_fwd(ft_dtype dt, void *y, float *rstd, const void *x,
                                       const void *w, int rows, int dim, float eps,
                                       cudaStream_t st);
size_t ft_cuda_rmsnorm_bwd_scratch_bytes(int rows, int dim);
cudaError_t ft_cuda_launch_rmsnorm_bwd(ft_dtype dt, ft_dtype gt, void *dx, const void *dx_base,
                                       void *dw, const void *dy, const void *x, const void *w,
                                       const float *rstd, int rows, int dim, void *scratch,
                                       cudaStream_t st);

/* ---- cuda_layernorm.cu ---- */
cudaError_t ft_cuda_launch_layernorm_fwd(ft_dtype dt, void *y, float *mean, float *rstd,
                                         const void *x, const void *w, const void *b, int rows,
                                         int dim, float eps, cudaStream_t st);
size_t ft_cuda_layernorm_bwd_scratch_bytes(int rows, int dim);
cudaError_t ft_cuda_launch_layernorm_bwd(ft_dtype dt, ft_dtype gt, void *dx,
                                         const void *dx_base, void *dw, void *db,
                                         const void *dy, const void *x, const void *w,
                                         const float *mean, const float *rstd, int rows, int dim,
                                         void *scratch, cudaStream_t st);

/* ---- cuda_gelu.cu (dx may be dout's buffer) ---- */
cudaError_t ft_cuda_launch_gelu_fwd(ft_dtype dt, ft_gelu_kind kind, void *out, const void *x,
                                    size_t n, cudaStream_t st);
cudaError_t ft_cuda_launch_gelu_bwd(ft_dtype dt, ft_gelu_kind kind, void *dx, const void *dout,
                                    const void *x, size_t n, cudaStream_t st);

/* ---- cuda_rope.cu ---- */
cudaError_t ft_cuda_launch_rope(ft_dtype dt, void *x, const float *cos_table,
                                const float *sin_table, const int32_t *pos, int tokens,
                                int n_heads, ft_rope_shape r, int inverse, cudaStream_t st);
/* q and k in one launch (where both take the same path; else one each) */
cudaError_t ft_cuda_launch_rope_qk(ft_dtype dt, void *q, int q_heads, void *k, int k_heads,
                                   const float *cos_table, const float *sin_table,
                                   const int32_t *pos, int tokens, ft_rope_shape r, int inverse,
                                   cudaStream_t st);

/* ---- cuda_embedding.cu ---- */
cudaError_t ft_cuda_launch_embedding_fwd(ft_dtype dt, void *out, const void *table,
                                         const int32_t *ids, int tokens, int dim,
                                         cudaStream_t st);
size_t ft_cuda_embedding_bwd_scratch_bytes(int tokens);
cudaError_t ft_cuda_launch_embedding_bwd(ft_dtype dt, ft_dtype gt, void *dtable,
                                         const void *dout, const int32_t *ids, int tokens,
                                         int dim, void *scratch, cudaStream_t st);

/* ---- cuda_cross_entropy.cu ---- */
cudaError_t ft_cuda_launch_cross_entropy(const void *logits, ft_dtype lt, void *dlogits,
                                         ft_dtype dt, float *row_loss, const int32_t *targets,
                                         const float *weight, int rows, int vocab,
                                         float grad_scale, cudaStream_t st);

/* ---- cuda_attention.cu, cuda_attention_bwd.cu ---- */
size_t ft_cuda_attention_fwd_scratch_bytes(ft_attn_shape s);
cudaError_t ft_cuda_launch_attention_fwd(float *out, float *lse, const float *q, const float *k,
                                         const float *v, const int32_t *segment, ft_attn_shape s,
                                         void *scratch, cudaStream_t st);
size_t ft_cuda_attention_bwd_scratch_bytes(ft_attn_shape s);
cudaError_t ft_cuda_launch_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                                         const float *out, const float *lse, const float *q,
                                         const float *k, const float *v, const int32_t *segment,
                                         ft_attn_shape s, void *scratch, cudaStream_t st);

/* ---- cuda_attention_tc.cu: tensor-core forward (bf16 q/k/v as raw bits; out stored as
 * out_dt, fp32 or bf16; fp32 lse; the layouts and semantics of
 * ft_cuda_launch_attention_fwd, sliding window included). Needs head_dim % 8 == 0 and <= 256
 * (ft_cuda_attention_tc_supported); bf16 attention calls of such shapes come here
 * (cuda_attention_route.c). */
int ft_cuda_attention_tc_supported(ft_attn_shape s);
/* The block the tensor-core backward's dK/dV pass takes for a shape now, from the
 * FTMPI_TC_BWD_KEYS and FTMPI_TC_BWD_LAYOUT switches and the device's shared memory
 * (cuda_attention_tc_bwd.cu): 64 keys of 16-key warps, 128 keys of them, or 128 keys in
 * the shared layout (cuda_attention_tc_bwd_shared.cuh). */
enum { FT_TC_BWD_OWN, FT_TC_BWD_WIDE, FT_TC_BWD_SHARED };
int ft_cuda_attention_tc_bwd_layout(ft_attn_shape s);
/* Whether the tensor-core forward runs on Hopper's warpgroup MMA for this shape now
 * (cuda_attention_wgmma.cu): FTMPI_TC_FWD_WGMMA=1, a compute capability 9.0 device whose
 * shared memory takes the block (head_dim up to 256) and a build with sm_90a code. */
int ft_cuda_attention_tc_fwd_wgmma(ft_attn_shape s);
/* Whether the tensor-core backward runs on it (cuda_attention_wgmma_bwd.cu):
 * FTMPI_TC_BWD_WGMMA=1, the deterministic two passes, head_dim <= 128, the same device
 * and build. */
int ft_cuda_attention_tc_bwd_wgmma(ft_attn_shape s);
/* Whether this build has the wgmma kernels at all (sm_90a code in NVCC_ARCH, or the
 * harness): without, the two switches above always fall back. */
int ft_cuda_attention_wgmma_built(void);
#ifdef FT_CUDA_EMULATION
/* Harness only: tile pairs the tensor-core kernels computed, per block (forward, dK/dV,
 * dQ: 0-2) and per warp, with the ones on which a warp evaluated the mask per element
 * (forward 3, 4; dK/dV 5, 6; dQ 7, 8); and the forward's warp tiles that skipped the
 * rescale of O, no row's maximum having moved (9). */
enum { FT_TC_COUNTERS = 10 };
extern unsigned long long ft_cuda_attention_tc_tiles[FT_TC_COUNTERS];
#endif
/* scratch: ft_cuda_attention_fwd_bf16_scratch_bytes (the segment ranges of tile skipping) */
size_t ft_cuda_attention_fwd_bf16_scratch_bytes(ft_attn_shape s);
cudaError_t ft_cuda_launch_attention_fwd_bf16(ft_dtype out_dt, void *out, float *lse,
                                              const uint16_t *q, const uint16_t *k,
                                              const uint16_t *v, const int32_t *segment,
                                              ft_attn_shape s, void *scratch, cudaStream_t st);
/* ---- cuda_attention_tc_bwd.cu: its backward (bf16 dout, fp32 lse; out read and dq, dk,
 * dv overwritten as dt, fp32 or bf16); scratch: ft_cuda_attention_bwd_bf16_scratch_bytes. */
size_t ft_cuda_attention_bwd_bf16_scratch_bytes(ft_attn_shape s);
cudaError_t ft_cuda_launch_attention_bwd_bf16(ft_dtype dt, void *dq, void *dk, void *dv,
                                              const uint16_t *dout, const void *out,
                                              const float *lse, const uint16_t *q,
                                              const uint16_t *k, const uint16_t *v,
                                              const int32_t *segment, ft_attn_shape s,
                                              void *scratch, cudaStream_t st);

/* ---- cuda_attention_cudnn_stats.cu: lse [batch, heads, seq_len] <-> the per-document
 * statistics [docs, heads, rows] of the cuDNN graphs with packed documents (to_lse: scatter
 * the document rows into lse; else gather them, rows past a document's length set to 0). */
cudaError_t ft_cuda_launch_sdpa_stats(float *lse, float *stats, const int32_t *doc_token,
                                      const int32_t *doc_len, int docs, int heads, int seq_len,
                                      int rows, int to_lse, cudaStream_t st);

/* ---- cuda_attention_decode.cu ---- */
size_t ft_cuda_attention_decode_scratch_bytes(int past, int n_new, int n_heads);
cudaError_t ft_cuda_launch_attention_decode(float *out, const float *q, const float *k_cache,
                                            const float *v_cache, int past, int n_new,
                                            int n_heads, int n_kv_heads, int head_dim,
                                            int window, void *scratch, cudaStream_t st);

/* ---- cuda_bias.cu ---- */
/* y stored as yt, b as dt */
cudaError_t ft_cuda_launch_bias_add(ft_dtype dt, ft_dtype yt, void *y, const void *b, int rows,
                                    int dim, cudaStream_t st);
cudaError_t ft_cuda_launch_bias_grad(ft_dtype dt, ft_dtype gt, void *db, const void *dy, int rows,
                                     int dim, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
