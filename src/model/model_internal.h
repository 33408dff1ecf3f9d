/* Internals shared by the model's translation units (block, head, driver). */
#ifndef FT_MODEL_MODEL_INTERNAL_H
#define FT_MODEL_MODEL_INTERNAL_H

#include "model/model.h"

/* What one block's forward keeps for its backward. */
typedef struct ft_block_acts {
    float *xn1, *rstd1;      /* attention-norm output, its 1/rms */
    float *q, *k, *v;        /* projections; q and k after RoPE */
    float *att, *lse;        /* attention output and log-sum-exp */
    float *h, *xn2, *rstd2;  /* residual after attention, mlp-norm output, 1/rms */
    float *gate, *up, *act;  /* SwiGLU inputs and output */
    /* qk_norm families only (NULL otherwise): q and k before their per-head
     * RMSNorm, and its 1/rms per (token, head) */
    float *q_raw, *k_raw, *rstd_q, *rstd_k;
} ft_block_acts;

/* Gradient scratch of one block's backward (shared by all blocks). */
typedef struct ft_block_scratch {
    float *dh, *dxn, *datt, *dq, *dk, *dv, *dgate, *dup, *dact;
    float *dq_raw, *dk_raw; /* qk_norm only: gradients of q_raw, k_raw */
} ft_block_scratch;

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

    float *rope_cos, *rope_sin;  /* [seq_len, head_dim/2] */

    ft_dev_batch in;
    int32_t *host_i32;           /* [max_tokens] staging for ids/targets/segment/pos */
    float *host_f32;             /* [max_tokens] staging for weights and row losses */

    int *plan;                   /* [2L+4] unit order of the current pass */
    float **block_in;            /* [L] saved input of every block (plus the head input) */
    ft_block_acts *acts;         /* [L] without checkpointing, [1] with */
    int n_act_sets;
    ft_block_scratch scratch;
    float *dres[2];              /* residual-stream gradient ping-pong */
    float *xf, *rstd_f, *dxf;    /* head: final-norm output, 1/rms, its gradient */
    float *logits;               /* [head_chunk_rows, vocab] */
    float *row_loss;             /* [max_tokens] */

    size_t act_bytes;
    int dry_run;                 /* count buffers, allocate none (planner) */
};

/* Block weights and gradients: pointers into a unit's flat buffers. */
typedef struct ft_block_params {
    const float *w[FT_BLK_N_TENSORS];
} ft_block_params;
typedef struct ft_block_grads {
    float *g[FT_BLK_N_TENSORS];
} ft_block_grads;

void ft_block_params_bind(const ft_unit_layout *u, const float *flat, ft_block_params *p);
void ft_block_grads_bind(const ft_unit_layout *u, float *flat, ft_block_grads *g);

/* y = block(x); activations into a. */
void ft_block_forward(ft_model *m, const ft_block_params *p, const float *x, float *y,
                      ft_block_acts *a);
/* dx = d(loss)/dx given dy (overwrite), parameter grads accumulate into g. */
void ft_block_backward(ft_model *m, const ft_block_params *p, ft_block_grads *g, const float *x,
                       const ft_block_acts *a, const float *dy, float *dx);

/* Head forward: final norm, logits in chunks, cross-entropy. With train != 0 also the
 * backward: dx (overwrite) and parameter grads. Returns the loss sum. */
double ft_head_forward_backward(ft_model *m, const float *w_out, const float *w_norm,
                                float *g_out, float *g_norm, const float *x, float *dx,
                                float grad_scale, int train);

#endif
