/* Private declarations of the CPU backend: one function per vtable entry, defined
 * in the file of its kernel family (cpu_<family>.c), plus the state the backend
 * keeps. Nothing outside src/backend/cpu includes this header. */
#ifndef FT_BACKEND_CPU_INTERNAL_H
#define FT_BACKEND_CPU_INTERNAL_H

#include "backend/backend.h"

/* Instruction sets the hand-vectorised kernels (attention tiles) are built for.
 * Chosen once in ft_backend_cpu_create from the CPU, or forced with the
 * environment variable FT_CPU_ISA=generic|avx2|avx512|avx512bf16 (tests use it to
 * exercise every variant; asking for one the CPU lacks falls back to the best it
 * has). avx512bf16 is avx512 plus the native bf16 GEMM (cpu_gemm_bf16.c), the default
 * where the CPU has AVX512-BF16; any lower choice widens bf16 GEMMs to sgemm. */
typedef enum ft_cpu_isa {
    FT_CPU_ISA_GENERIC = 0, /* portable C, vectorised by the compiler for the baseline */
    FT_CPU_ISA_AVX2 = 1,    /* x86-64 AVX2 + FMA */
    FT_CPU_ISA_AVX512 = 2,  /* x86-64 AVX-512F */
} ft_cpu_isa;

typedef struct ft_cpu_state {
    ft_cpu_isa isa;
    bool bf16_gemm; /* bf16 x bf16 GEMMs on VDPBF16PS (cpu_gemm_bf16.c) */
    double phase_open[FT_PHASE_COUNT]; /* ms: where each phase's open span began */
    double phase_ms[FT_PHASE_COUNT];   /* ms summed since the last collect */
} ft_cpu_state;

/* Step-phase timing by the wall clock (cpu_phase_time.c). */
void ft_cpu_phase_begin(ft_backend *be, ft_phase p);
void ft_cpu_phase_end(ft_backend *be, ft_phase p);
void ft_cpu_phase_collect(ft_backend *be, double *ms);

static inline ft_cpu_isa ft_cpu_isa_of(const ft_backend *be)
{
    return ((const ft_cpu_state *)be->impl)->isa;
}

/* Loops shorter than this run on one thread: below it, waking a team of threads
 * costs more than the work (elementwise ops move ~8-16 bytes per element). */
#define FT_CPU_PAR_MIN 32768

/* The fp32 kernels, one per op (cpu_<family>.c). The vtable's entries for the
 * transformer ops are the cpu_widen.c functions below, which call these for fp32
 * storage and on widened copies for bf16. */

/* cpu_matmul.c */
void ft_cpu_matmul(ft_backend *be, float *c, const float *a, const float *b, int m, int n, int k,
                   bool trans_a, bool trans_b, float alpha, float beta);
void ft_cpu_add(ft_backend *be, float *y, const float *x, size_t n);
void ft_cpu_scale(ft_backend *be, float *x, float s, size_t n);
double ft_cpu_sum_squares(ft_backend *be, const float *x, size_t n);
void ft_cpu_sum_squares_each(ft_backend *be, const float *const *x, const size_t *n, int count,
                             double *out);

/* cpu_gemm_bf16.c: c = alpha op(a) op(b) + beta c with a, b bf16 and c stored as ct
 * (fp32 or bf16), on AVX512-BF16. Returns -1 (nothing written) when this build or CPU
 * cannot, or a packing buffer cannot be allocated; the caller then widens. */
bool ft_cpu_gemm_bf16_available(void);
int ft_cpu_gemm_bf16(ft_dtype ct, void *c, const uint16_t *a, const uint16_t *b, int m, int n,
                     int k, bool trans_a, bool trans_b, float alpha, float beta);

/* cpu_rmsnorm.c */
void ft_cpu_rmsnorm_fwd(ft_backend *be, float *y, float *rstd, const float *x, const float *w,
                        int rows, int dim, float eps);
void ft_cpu_rmsnorm_bwd(ft_backend *be, float *dx, const float *dx_base, float *dw,
                        const float *dy, const float *x, const float *w, const float *rstd,
                        int rows, int dim);

/* cpu_layernorm.c */
void ft_cpu_layernorm_fwd(ft_backend *be, float *y, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int rows, int dim, float eps);
void ft_cpu_layernorm_bwd(ft_backend *be, float *dx, const float *dx_base, float *dw, float *db,
                          const float *dy, const float *x, const float *w, const float *mean,
                          const float *rstd, int rows, int dim);

/* cpu_rope.c */
void ft_cpu_rope(ft_backend *be, float *x, const float *cos_table, const float *sin_table,
                 const int32_t *pos, int tokens, int n_heads, ft_rope_shape r, bool inverse);

/* cpu_attention.c */
void ft_cpu_attention_fwd(ft_backend *be, float *out, float *lse, const float *q, const float *k,
                          const float *v, const int32_t *segment, ft_attn_shape s);
void ft_cpu_attention_bwd(ft_backend *be, float *dq, float *dk, float *dv, const float *dout,
                          const float *out, const float *lse, const float *q, const float *k,
                          const float *v, const int32_t *segment, ft_attn_shape s);

/* cpu_attention_decode.c */
void ft_cpu_attention_decode(ft_backend *be, float *out, const float *q, const float *k_cache,
                             const float *v_cache, int past, int n_new, int n_heads,
                             int n_kv_heads, int head_dim, int window);

/* cpu_bias.c */
void ft_cpu_bias_add(ft_backend *be, float *y, const float *b, int rows, int dim);
void ft_cpu_bias_grad(ft_backend *be, float *db, const float *dy, int rows, int dim);

/* cpu_swiglu.c */
void ft_cpu_swiglu_fwd(ft_backend *be, float *out, const float *gate, const float *up, size_t n);
void ft_cpu_swiglu_bwd(ft_backend *be, float *dgate, float *dup, const float *dout,
                       const float *gate, const float *up, size_t n, float *out);

/* cpu_dropout.c (fp32 and bf16 storage) */
void ft_cpu_dropout(ft_backend *be, ft_dtype dt, void *y, const void *x, int rows, int cols,
                    ft_dropout_mask m, bool accumulate);

/* cpu_gelu.c */
void ft_cpu_gelu_fwd(ft_backend *be, ft_gelu_kind kind, float *out, const float *x, size_t n);
void ft_cpu_gelu_bwd(ft_backend *be, ft_gelu_kind kind, float *dx, const float *dout,
                     const float *x, size_t n);

/* cpu_embedding.c */
void ft_cpu_embedding_fwd(ft_backend *be, float *out, const float *table, const int32_t *ids,
                          int tokens, int dim);
void ft_cpu_embedding_bwd(ft_backend *be, float *dtable, const float *dout, const int32_t *ids,
                          int tokens, int dim);

/* cpu_cross_entropy.c */
void ft_cpu_cross_entropy(ft_backend *be, const void *logits, ft_dtype lt, void *dlogits,
                          ft_dtype dt, float *row_loss, const int32_t *targets,
                          const float *weight, int rows, int vocab, float grad_scale);

/* cpu_optim.c */
void ft_cpu_adamw_step(ft_backend *be, float *param, const float *grad, float *m, float *v,
                       size_t n, const ft_adamw_params *p);
void ft_cpu_adamw_rows_bf16(ft_backend *be, uint16_t *out, const float *param, const float *grad,
                            const float *m, const float *v, const int32_t *rows, size_t n_rows,
                            size_t row_len, const ft_adamw_params *p);
void ft_cpu_sgd_step(ft_backend *be, float *param, const float *grad, float *momentum_buf,
                     size_t n, const ft_sgd_params *p);

/* cpu_widen.c: the vtable's entries for the transformer ops. fp32 calls go straight to
 * the fp32 kernels above; bf16 storage runs them on widened copies (see the file). */
void ft_cpu_widen_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b,
                         int m, int n, int k, bool trans_a, bool trans_b, float alpha, float beta);
void ft_cpu_widen_matmul_add(ft_backend *be, ft_gemm_types t, void *d, const void *c,
                             const void *a, const void *b, int m, int n, int k, bool trans_a,
                             bool trans_b);
void ft_cpu_widen_matmul_pair(ft_backend *be, ft_gemm_types t, void *c0, void *c1, const void *a0,
                              const void *a1, const void *b0, const void *b1, int m, int n, int k,
                              bool trans_a, bool trans_b, float alpha, float beta);
void ft_cpu_widen_rmsnorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *rstd, const void *x,
                              const void *w, int rows, int dim, float eps);
void ft_cpu_widen_rmsnorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                              const void *dx_base, void *dw, const void *dy, const void *x,
                              const void *w, const float *rstd, int rows, int dim);
void ft_cpu_widen_layernorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *mean, float *rstd,
                                const void *x, const void *w, const void *b, int rows, int dim,
                                float eps);
void ft_cpu_widen_layernorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                                const void *dx_base, void *dw, void *db, const void *dy,
                                const void *x, const void *w, const float *mean,
                                const float *rstd, int rows, int dim);
void ft_cpu_widen_rope(ft_backend *be, ft_dtype dt, void *x, const float *cos_table,
                       const float *sin_table, const int32_t *pos, int tokens, int n_heads,
                       ft_rope_shape r, bool inverse);
void ft_cpu_widen_rope_qk(ft_backend *be, ft_dtype dt, void *q, int q_heads, void *k,
                          int k_heads, const float *cos_table, const float *sin_table,
                          const int32_t *pos, int tokens, ft_rope_shape r, bool inverse);
void ft_cpu_widen_attention_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse,
                                const void *q, const void *k, const void *v,
                                const int32_t *segment, ft_attn_shape s);
void ft_cpu_widen_attention_bwd(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                                const void *dout, const void *out, const float *lse,
                                const void *q, const void *k, const void *v,
                                const int32_t *segment, ft_attn_shape s);
void ft_cpu_widen_attention_decode(ft_backend *be, ft_dtype dt, void *out, const void *q,
                                   const void *k_cache, const void *v_cache, int past, int n_new,
                                   int n_heads, int n_kv_heads, int head_dim, int window);
void ft_cpu_widen_bias_add(ft_backend *be, ft_dtype dt, ft_dtype yt, void *y, const void *b,
                           int rows, int dim);
void ft_cpu_widen_bias_grad(ft_backend *be, ft_dtype dt, ft_dtype gt, void *db, const void *dy,
                            int rows, int dim);
void ft_cpu_widen_swiglu_fwd(ft_backend *be, ft_dtype dt, void *out, const void *gate,
                             const void *up, size_t n);
void ft_cpu_widen_swiglu_bwd(ft_backend *be, ft_dtype dt, void *dgate, void *dup,
                             const void *dout, const void *gate, const void *up, size_t n,
                             void *out);
void ft_cpu_widen_gelu_fwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *out,
                           const void *x, size_t n);
void ft_cpu_widen_gelu_bwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *dx,
                           const void *dout, const void *x, size_t n);
void ft_cpu_widen_embedding_fwd(ft_backend *be, ft_dtype dt, void *out, const void *table,
                                const int32_t *ids, int tokens, int dim);
void ft_cpu_widen_embedding_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dtable,
                                const void *dout, const int32_t *ids, int tokens, int dim);

/* cpu_cast.c */
void ft_cpu_f32_to_bf16(ft_backend *be, uint16_t *dst, const float *src, size_t n);
void ft_cpu_bf16_to_f32(ft_backend *be, float *dst, const uint16_t *src, size_t n);

#endif
