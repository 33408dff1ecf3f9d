/* Internals of the model driver (model.c) and its head (head.c). The block
 * (block.h) sees none of it: it runs on the narrow ft_block_ctx. */
#ifndef FT_MODEL_MODEL_INTERNAL_H
#define FT_MODEL_MODEL_INTERNAL_H

#include "model/block.h"
#include "model/family_norm.h"
#include "model/model.h"

/* Per-micro-batch inputs on the backend. */
typedef struct ft_dev_batch {
    int batch, seq_len, tokens;
    int32_t *ids, *targets, *segment, *pos;
    float *weights;
    int has_segments;
} ft_dev_batch;

struct ft_model {
    ft_model_layout layout;   /* copy of the caller's, tensors owned by the caller */
    ft_backend *be;
    ft_model_options opt;
    ft_attn_shape attn;       /* batch filled per call */

    ft_dtype dt;                 /* opt.dtype: activations and working parameters */
    size_t esize;                /* bytes per element of dt */
    ft_dtype gt;                 /* the current source's grad_dtype (set per pass) */
    size_t gsize;                /* bytes per element of gt */
    float *rope_cos, *rope_sin;  /* [seq_len, rot_dim/2] */

    ft_dev_batch in;
    int32_t *host_i32;           /* [max_tokens] staging for ids/targets/segment/pos */
    float *host_f32;             /* [max_tokens] staging for weights and row losses */

    int *plan;                   /* [2L+4] unit order of the current pass */
    void **block_in;             /* [L+1] saved input of every block (plus the head input) */
    /* [L] without checkpointing; with it one set that the recomputed blocks share, then
     * one for each later block: [1 + L - recomputed] */
    ft_block_acts *acts;
    int n_act_sets;
    int recomputed;              /* blocks 0 .. recomputed-1 share acts[0] (0: none) */
    /* checkpoint_keep: what blocks 0 .. n_kept-1 (the ones that recompute: recomputed - 1
     * of them) keep of their forward, which their sets take instead of acts[0]'s */
    ft_block_acts *kept;
    int n_kept;
    ft_block_scratch scratch;
    void *dres[2];               /* residual-stream gradient ping-pong */
    void *xf, *dxf;              /* head: final-norm output and its gradient */
    float *rstd_f, *mean_f;      /* head: the final norm's 1/rms (1/std) and mean (LayerNorm) */
    /* Head (head.c). dlogits [head_group_rows rounded up to even, vocab], stored as the
     * activations, holds a group's logits, turned into dlogits in place; logits = NULL.
     * bf16 with an output bias: logits [head_chunk_rows, vocab] fp32 apart. */
    float *logits;
    void *dlogits;
    float *row_loss;             /* [max_tokens] */
    struct {                     /* the head's rows that have a target, gathered */
        int32_t *live, *inv, *targets; /* [max_tokens] */
        float *weights;                /* [max_tokens] */
        void *x, *dx;                  /* [max_tokens, H]: scratch.dh, scratch.dxn */
        int n;                         /* live rows of the staged batch (stage_batch) */
    } pack;
    int32_t *host_pack;          /* [4 max_tokens] host staging of pack's index lists */

    /* LoRA: the base is frozen (model.h) and the adapters come from their own source */
    bool frozen;
    ft_param_source adapters;
    int *adapter_plan;           /* [2L] */
    /* LoRA dropout of the training micro-batch in flight (p 0 at any other time: a
     * forward for evaluation or logits never drops) */
    ft_lora_dropout lora_dropout;

    size_t act_bytes;
    int dry_run;                 /* count buffers, allocate none (planner) */
};

/* The family's norm (model/family_norm.h) in the model's storage types. */
static inline void ft_model_norm_fwd(const ft_model *m, void *y, float *mean, float *rstd,
                                     const void *x, const void *w, const void *b, int rows)
{
    ft_family_norm_fwd(m->be, &m->layout.config, m->dt, y, mean, rstd, x, w, b, rows);
}
/* dx = dx_base + Norm^T dy (family_norm.h); a frozen norm's dw and db (NULL) are summed
 * into the scratch's sink (block.h). */
static inline void ft_model_norm_bwd(const ft_model *m, void *dx, const void *dx_base, void *dw,
                                     void *db, const void *dy, const void *x, const void *w,
                                     const float *mean, const float *rstd, int rows)
{
    float *sink = m->scratch.grad_sink;
    const size_t H = (size_t)m->layout.config.hidden_size;
    if (ft_model_family_of(&m->layout.config)->layernorm && !db)
        db = sink + (H > (size_t)m->layout.config.head_dim ? H : (size_t)m->layout.config.head_dim);
    ft_family_norm_bwd(m->be, &m->layout.config, m->dt, m->gt, dx, dx_base, dw ? dw : sink, db,
                       dy, x, w, mean, rstd, rows);
}

/* The head's tensors (model dtype) and their gradients (gradient type): the output
 * projection (lm_head, or the embedding when tied), its bias (gptj), the final
 * norm's weight and bias (LayerNorm). Absent ones are NULL. */
typedef struct ft_head_params {
    const void *w_out, *b_out, *w_norm, *b_norm;
} ft_head_params;
typedef struct ft_head_grads {
    void *w_out, *b_out, *w_norm, *b_norm;
    bool w_out_first; /* w_out holds no value yet: written, not added to (grads_first) */
} ft_head_grads;

/* The staged batch's rows that have a target (host copies from stage_batch) as the
 * device index lists of m->pack, uploaded with the batch so that the head makes no
 * host round trip in the middle of a pass; sets m->pack.n, their count. */
void ft_head_pack_live_rows(ft_model *m);
/* The sum of the head's per-row losses of the last pass: the one wait for the device
 * per micro-batch, at its end. */
double ft_head_loss_sum(ft_model *m);

/* Final norm into m->xf; logits = x W^T (+ b) of rows of x (model dtype) into an
 * fp32 [rows, vocab] buffer. */
void ft_head_norm(ft_model *m, const ft_head_params *p, const void *x);
void ft_head_logits(ft_model *m, const ft_head_params *p, void *logits, ft_dtype lt,
                    const void *x, int rows);

/* Head forward: final norm, logits in chunks, cross-entropy (the per-row losses stay
 * on the device: ft_head_loss_sum). With train != 0 also the backward: dx (overwrite)
 * and parameter grads (g may be NULL without train), the output weight's gradient
 * accumulated once per group of head_group_rows target rows. Over the rows that
 * ft_head_pack_live_rows staged. */
void ft_head_forward_backward(ft_model *m, const ft_head_params *p, ft_head_grads *g,
                              const void *x, void *dx, float grad_scale, int train);

/* The GEMM types of the model's matmuls: everything in the model's dtype (the
 * logits' fp32 product: model/head_logits.h). */
static inline ft_gemm_types ft_model_gemm(const ft_model *m)
{
    return (ft_gemm_types){ m->dt, m->dt, m->dt };
}
/* A weight gradient's GEMM: model-dtype operands into the source's gradient type. */
static inline ft_gemm_types ft_model_gemm_to_grad(const ft_model *m)
{
    return (ft_gemm_types){ m->dt, m->dt, m->gt };
}

/* p + i elements of the model's dtype. */
static inline void *ft_model_at(const ft_model *m, const void *p, size_t i)
{
    return (char *)p + i * m->esize;
}

#endif
