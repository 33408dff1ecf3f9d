/* One transformer block, forward and backward, on a narrow context: the backend, the
 * storage types, the model's shape, the RoPE tables and positions of the tokens, and
 * how attention finds its keys. It knows nothing of the model driver (ft_model), the
 * parameter source or the KV cache, so the trainer, evaluation (src/model/model.c)
 * and the KV-cache decoder (src/generate/decoder.c) run this one forward.
 *
 * Attention: by default the full-sequence flash attention of the batch (attn,
 * segment), which is what training and evaluation use and what the backward
 * differentiates. A decoder sets `attend` instead: the forward then writes this
 * call's keys and values into acts.k / acts.v (which the decoder points at rows of
 * its cache) and hands q, k, v to the hook, which attends over the cache. */
#ifndef FT_MODEL_BLOCK_H
#define FT_MODEL_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/ckpt_keep.h"
#include "model/layout.h"
#include "model/lora.h"

/* What one block's forward keeps for its backward. Activations (void *) are stored
 * in the context's dt; the statistics (float *) are always fp32. */
typedef struct ft_block_acts {
    void *xn1, *q, *k, *v;   /* attention-norm output; projections, q and k after RoPE */
    void *att, *h, *xn2;     /* attention output, residual after attention, mlp-norm output */
    void *gate, *up, *act;   /* SwiGLU inputs and output (GELU: up = pre-activation,
                              * no gate) */
    /* qk_norm families only (NULL otherwise): q and k before their per-head RMSNorm */
    void *q_raw, *k_raw;
    float *rstd1, *lse, *rstd2; /* 1/rms of the two norms, attention log-sum-exp */
    float *rstd_q, *rstd_k;     /* qk_norm only: 1/rms per (token, head) */
    float *mean1, *mean2;       /* LayerNorm families only: the norms' row means */
    /* LoRA only (ft_block_lora_acts_alloc): u = a A^T [tokens, rank] of each site */
    void *lora_u[FT_LORA_N_SITES];
} ft_block_acts;

/* Gradient scratch of one block's backward (shared by all blocks), context dt. */
typedef struct ft_block_scratch {
    void *dh, *dxn, *datt, *dq, *dk, *dv, *dgate, *dup; /* d(act) reuses acts.act */
    void *dq_raw, *dk_raw; /* qk_norm only: gradients of q_raw, k_raw */
    void *lora_du;         /* LoRA only: [tokens, rank], the gradient of a site's u */
    /* LoRA dropout only (training; used by the forward too): [tokens, widest input of a
     * targeted site], drop(a) of the site at hand, then du A before its dropout */
    void *lora_drop;
    /* A frozen model's norm weights and biases have no gradient, but the norm backward
     * ops always sum one: they sum it here and it is never read. [2 max(hidden,
     * head_dim)] fp32 elements (room for dw and db of either gradient type). */
    void *grad_sink;
} ft_block_scratch;

/* Block weights (dt) and gradients (gt): pointers into a unit's flat buffers, NULL
 * for the tensors the family does not have. A frozen block (LoRA) has every g NULL:
 * its backward computes the input gradient and no weight gradient. lora: the block's
 * adapters and their gradients (NULL: none), bound by the caller. */
typedef struct ft_block_params {
    const void *w[FT_BLK_N_TENSORS];
    const ft_lora_params *lora;
} ft_block_params;
typedef struct ft_block_grads {
    void *g[FT_BLK_N_TENSORS];
    ft_lora_grads *lora;
    /* The 2-D weights' gradients hold no value yet (ft_param_source.grads_first): their
     * GEMMs write them (beta 0) instead of adding. ft_block_grads_bind clears it. */
    bool first;
} ft_block_grads;

typedef struct ft_block_ctx ft_block_ctx;

/* out [tokens, n_heads*head_dim] = attention of q over the keys visible to it; k and v
 * are this call's projections (already where the hook wants them). lse may be
 * ignored (only the backward reads it). */
typedef void (*ft_block_attend_fn)(void *hook_ctx, const ft_block_ctx *b, void *out,
                                   float *lse, const void *q, const void *k, const void *v);

struct ft_block_ctx {
    ft_backend *be;
    const ft_model_config *config;
    ft_dtype dt;                 /* activations and weights */
    ft_dtype gt;                 /* parameter gradients (backward only) */
    const float *rope_cos, *rope_sin; /* [positions, rot_dim/2], row p = position p */
    const int32_t *pos;          /* [tokens] on the backend: each token's position */
    int tokens;                  /* rows of x */
    /* Full-sequence attention (attend == NULL): the batch shape and document ids
     * (NULL: one document per row). */
    ft_attn_shape attn;
    const int32_t *segment;
    ft_block_attend_fn attend;   /* NULL: flash attention over attn/segment */
    void *attend_ctx;
    ft_block_scratch *scratch;   /* backward only (and a training forward with LoRA dropout) */
    /* Backward only: nobody reads dx (the first block when the embedding is frozen, as
     * under LoRA). A block whose norms take no gradient then skips what only feeds dx:
     * the input-gradient GEMMs of the projections that read the input's norm(s) (q, k,
     * v; with a parallel residual the MLP's too) and those norms' backward; dx is left
     * unwritten. A block whose norms train still computes it (their gradients need it). */
    bool skip_input_grad;
    /* Forward only: a recompute for the backward (activation checkpointing), which
     * rebuilds only what the backward reads and leaves y unwritten: the MLP's down
     * projection, whose output nobody reads, is skipped (2 N H I FLOPs, a sixth of a
     * Llama block's forward), and with a parallel residual the attention's output
     * projection too; an adapter there still rebuilds its u. */
    bool rebuild_only;
    /* With rebuild_only, what the set still holds of this block's forward
     * (ft_block_attention_acts_alloc; model/ckpt_keep.h). The whole attention half: the
     * recompute repeats the norms (Norm1's output feeds the q, k, v weight gradients,
     * Norm2's the MLP) and the MLP half, not the q, k, v and output projections nor
     * attention. Attention's output and log-sum-exp: it repeats everything but attention
     * itself. */
    ft_ckpt_keep kept;
    /* The recompute (rebuild_only) of a block and that block's backward: the SwiGLU's
     * output (act) is not rebuilt; the backward makes it in the SwiGLU backward's pass,
     * which reads gate and up anyway (backend.h, swiglu_bwd's out), before the down
     * projection's weight gradient reads it. A pass over three [N, I] tensors fewer a
     * recomputed block. Ignored for GELU MLPs and under an adapter on the down
     * projection (whose u the recompute builds from act). */
    bool act_in_backward;
};

/* Allocates one set of activations for `tokens` rows (the family's buffers only,
 * others NULL) through alloc, which returns NULL on failure. Without with_kv, k and v
 * are left NULL for the caller to point (a decoder: rows of its cache). Returns
 * nonzero when an allocation failed; ft_block_acts_free frees what was allocated. */
typedef void *(*ft_block_alloc_fn)(void *alloc_ctx, size_t bytes);
/* A GEMM pair's two buffers of `bytes` each (k and v, gate and up, their gradients) share
 * one allocation of ft_block_pair_offset(bytes) + bytes, the second starting this many
 * bytes (256-aligned) after the first: they then sit at a fixed distance whatever the
 * allocator does, and the pair is one strided batch (backend.h, matmul_pair). */
size_t ft_block_pair_offset(size_t bytes);
int ft_block_acts_alloc(ft_block_acts *a, const ft_model_config *c, ft_dtype dt, size_t tokens,
                        bool with_kv, ft_block_alloc_fn alloc, void *alloc_ctx);
void ft_block_acts_free(ft_backend *be, ft_block_acts *a);
/* The part of a set that a recomputed block keeps (block ctx: kept, not
 * FT_CKPT_KEEP_NOTHING). FT_CKPT_KEEP_ATTENTION: q, k, v, att, lse, with qk_norm q_raw,
 * k_raw, rstd_q, rstd_k, the residual after attention h (not with a parallel residual,
 * whose recompute needs none), and with lora (may be NULL) the u of the adapters on q,
 * k, v and the output projection. FT_CKPT_KEEP_ATTENTION_OUTPUT: att and lse. Everything
 * else NULL. Freed by ft_block_acts_free. */
int ft_block_attention_acts_alloc(ft_block_acts *a, const ft_model_config *c,
                                  const ft_lora_config *lora, ft_ckpt_keep keep, ft_dtype dt,
                                  size_t tokens, ft_block_alloc_fn alloc, void *alloc_ctx);
/* *view = *shared with each buffer that kept (above) holds taken from kept: a recomputed
 * block's set. */
void ft_block_acts_with_attention(ft_block_acts *view, const ft_block_acts *shared,
                                  const ft_block_acts *kept);
/* Adds the adapters' u buffers of the targeted sites to a (freed with it). */
int ft_block_lora_acts_alloc(ft_block_acts *a, const ft_lora_config *lora, ft_dtype dt,
                             size_t tokens, ft_block_alloc_fn alloc, void *alloc_ctx);

void ft_block_params_bind(const ft_unit_layout *u, ft_dtype dt, const void *flat,
                          ft_block_params *p);
void ft_block_grads_bind(const ft_unit_layout *u, ft_dtype gt, void *flat, ft_block_grads *g);

/* y = block(x) over b->tokens rows (y must not alias x); activations into a (with
 * rebuild_only, only those, and y is not written). */
void ft_block_forward(const ft_block_ctx *b, const ft_block_params *p, const void *x, void *y,
                      ft_block_acts *a);
/* dx = d(loss)/dx given dy (overwrite; see skip_input_grad), parameter grads accumulate
 * into g; a->act is overwritten (it carries d(act)). Needs the full-sequence attention
 * (attend NULL). */
void ft_block_backward(const ft_block_ctx *b, const ft_block_params *p, ft_block_grads *g,
                       const void *x, ft_block_acts *a, const void *dy, void *dx);

#endif
