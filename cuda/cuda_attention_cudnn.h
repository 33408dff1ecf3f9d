/* Attention through cuDNN's fused scaled-dot-product attention (host C, cuDNN >= 9 graph
 * API). cuda_attention_route.c asks here first for bf16 attention; a call returns
 * FT_CUDNN_DECLINED when cuDNN does not take it (no cuDNN in the build, the switch off, a
 * shape or document layout outside what the graph expresses, or cuDNN finding no engine
 * for the graph), and the caller then runs the own kernels.
 *
 * Switch: FTMPI_CUDNN_ATTENTION=auto (default: cuDNN where it takes the call), off (the
 * own kernels always), force (cuDNN or a fatal message: benchmarks and tests that must
 * measure or check this path). Read once, when the backend first reaches attention. */
#ifndef FT_CUDA_ATTENTION_CUDNN_H
#define FT_CUDA_ATTENTION_CUDNN_H

#include "backend/backend.h"

enum { FT_CUDNN_DONE = 0, FT_CUDNN_DECLINED = 1 };

/* The context the backend state keeps (plans per shape, document buffers); NULL until
 * first used. */
typedef struct ft_cudnn_attn ft_cudnn_attn;

int ft_cudnn_attention_fwd(ft_backend *be, void *out, float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s);
int ft_cudnn_attention_bwd(ft_backend *be, void *dq, void *dk, void *dv, const void *dout,
                           const void *out, const float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s);
/* Releases the context (plans, handle, buffers); NULL is allowed. */
void ft_cudnn_attention_release(ft_cudnn_attn *c);

#endif
