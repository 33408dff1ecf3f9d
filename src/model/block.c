/* One transformer block, forward and backward:
 *   h = x + Attn(RMSNorm(x) ; Wq, Wk, Wv, Wo)
 *   y = h + Wdown (silu(Wgate n) * (Wup n)),  n = RMSNorm(h)
 * Linear layers use HF's [out, in] weights: z = a W^T, so
 *   da = dz W  and  dW += dz^T a.
 *
 * The families (model/family.h) differ only in how q and k are made and in the
 * attention mask:
 *   q = RoPE(QKNorm(n Wq^T + bq))     (k likewise; v = n Wv^T + bv)
 * with the biases b present for qwen2 (db = sum over tokens of dz) and QKNorm an
 * RMSNorm over each head's head_dim values with one [head_dim] weight shared by
 * the heads (qwen3): on the [tokens, heads*head_dim] tensor it is the ordinary
 * RMSNorm op on tokens*heads rows of head_dim. Mistral's sliding window is a field
 * of the attention shape (m->attn.window), set once at model creation.
 */
#include "model/model_internal.h"

void ft_block_params_bind(const ft_model *m, const ft_unit_layout *u, const void *flat,
                          ft_block_params *p)
{
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        p->w[i] = u->slot[i] >= 0 ? ft_model_at(m, flat, u->tensors[u->slot[i]].offset) : NULL;
}

void ft_block_grads_bind(const ft_model *m, const ft_unit_layout *u, void *flat,
                         ft_block_grads *g)
{
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        g->g[i] = u->slot[i] >= 0 ? (char *)flat + u->tensors[u->slot[i]].offset * m->gsize
                                  : NULL;
}

/* z[N,out] (+)= a[N,in] W^T */
static void linear_fwd(const ft_model *m, void *z, const void *a, const void *w, int n, int out,
                       int in, float beta)
{
    m->be->ops->matmul(m->be, ft_model_gemm(m), z, a, w, n, out, in, false, true, 1.0f, beta);
}

/* dW[out,in] += dz^T a (fp32 accumulation, stored as the gradient type) ;
 * da[N,in] (+)= dz[N,out] W.
 * dW first: da may then overwrite a (the MLP's down projection reuses the SwiGLU
 * output's buffer for its gradient). */
static void linear_bwd(const ft_model *m, void *da, void *dw, const void *dz, const void *a,
                       const void *w, int n, int out, int in, float beta_da)
{
    ft_backend *be = m->be;
    be->ops->matmul(be, ft_model_gemm_to_grad(m), dw, dz, a, out, in, n, true, false, 1.0f, 1.0f);
    be->ops->matmul(be, ft_model_gemm(m), da, dz, w, n, in, out, false, false, 1.0f, beta_da);
}

/* z = RoPE(QKNorm(a W^T + b)) for q (or k): n_heads heads. Without qk_norm the
 * projection goes straight into z; with it into z_raw, normalised into z. */
static void project_rotate(ft_model *m, void *z, void *z_raw, float *rstd, const void *a,
                           const void *w, const void *bias, const void *norm_w, int n_heads)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, out = n_heads * c->head_dim;
    void *proj = norm_w ? z_raw : z;
    linear_fwd(m, proj, a, w, N, out, H, 0.0f);
    if (bias)
        be->ops->bias_add(be, m->dt, m->dt, proj, bias, N, out);
    if (norm_w)
        be->ops->rmsnorm_fwd(be, m->dt, z, rstd, proj, norm_w, N * n_heads, c->head_dim,
                             (float)c->rms_norm_eps);
    be->ops->rope(be, m->dt, z, m->rope_cos, m->rope_sin, m->in.pos, N, n_heads,
                  (ft_rope_shape){ c->head_dim, c->head_dim, false }, false);
}

/* Backward of project_rotate given dz (the attention's dq or dk; destroyed):
 * dz_raw = QKNorm^T(RoPE^T dz) into dz_raw (qk_norm) or in place, bias and weight
 * grads accumulate, da (+)= dz_raw W with beta_da. */
static void project_rotate_bwd(ft_model *m, void *da, void *dw, void *db, void *dnorm_w,
                               void *dz, void *dz_raw, const void *z_raw, const float *rstd,
                               const void *a, const void *w, const void *norm_w, int n_heads,
                               float beta_da)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, out = n_heads * c->head_dim;
    /* The rotation is orthogonal: its backward is the rotation by -angle. */
    be->ops->rope(be, m->dt, dz, m->rope_cos, m->rope_sin, m->in.pos, N, n_heads,
                  (ft_rope_shape){ c->head_dim, c->head_dim, false }, true);
    void *dproj = dz;
    if (norm_w) {
        be->ops->zero(be, dz_raw, (size_t)N * out * m->esize);
        be->ops->rmsnorm_bwd(be, m->dt, m->gt, dz_raw, dnorm_w, dz, z_raw, norm_w, rstd, N * n_heads,
                             c->head_dim);
        dproj = dz_raw;
    }
    if (db)
        be->ops->bias_grad(be, m->dt, m->gt, db, dproj, N, out);
    linear_bwd(m, da, dw, dproj, a, w, N, out, H, beta_da);
}

void ft_block_forward(ft_model *m, const ft_block_params *p, const void *x, void *y,
                      ft_block_acts *a)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, I = c->intermediate_size;
    const int Q = c->num_attention_heads * c->head_dim;
    const int KV = c->num_key_value_heads * c->head_dim;
    const float eps = (float)c->rms_norm_eps;
    const int32_t *seg = m->in.has_segments ? m->in.segment : NULL;

    be->ops->rmsnorm_fwd(be, m->dt, a->xn1, a->rstd1, x, p->w[FT_BLK_ATTN_NORM], N, H, eps);
    project_rotate(m, a->q, a->q_raw, a->rstd_q, a->xn1, p->w[FT_BLK_Q], p->w[FT_BLK_Q_BIAS],
                   p->w[FT_BLK_Q_NORM], c->num_attention_heads);
    project_rotate(m, a->k, a->k_raw, a->rstd_k, a->xn1, p->w[FT_BLK_K], p->w[FT_BLK_K_BIAS],
                   p->w[FT_BLK_K_NORM], c->num_key_value_heads);
    linear_fwd(m, a->v, a->xn1, p->w[FT_BLK_V], N, KV, H, 0.0f);
    if (p->w[FT_BLK_V_BIAS])
        be->ops->bias_add(be, m->dt, m->dt, a->v, p->w[FT_BLK_V_BIAS], N, KV);
    be->ops->attention_fwd(be, m->dt, a->att, a->lse, a->q, a->k, a->v, seg, m->attn);
    be->ops->copy(be, a->h, x, (size_t)N * H * m->esize);
    linear_fwd(m, a->h, a->att, p->w[FT_BLK_O], N, H, Q, 1.0f);

    be->ops->rmsnorm_fwd(be, m->dt, a->xn2, a->rstd2, a->h, p->w[FT_BLK_MLP_NORM], N, H, eps);
    linear_fwd(m, a->gate, a->xn2, p->w[FT_BLK_GATE], N, I, H, 0.0f);
    linear_fwd(m, a->up, a->xn2, p->w[FT_BLK_UP], N, I, H, 0.0f);
    be->ops->swiglu_fwd(be, m->dt, a->act, a->gate, a->up, (size_t)N * I);
    be->ops->copy(be, y, a->h, (size_t)N * H * m->esize);
    linear_fwd(m, y, a->act, p->w[FT_BLK_DOWN], N, H, I, 1.0f);
}

void ft_block_backward(ft_model *m, const ft_block_params *p, ft_block_grads *g, const void *x,
                       ft_block_acts *a, const void *dy, void *dx)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, I = c->intermediate_size;
    const int Q = c->num_attention_heads * c->head_dim;
    const int KV = c->num_key_value_heads * c->head_dim;
    const int32_t *seg = m->in.has_segments ? m->in.segment : NULL;
    ft_block_scratch *s = &m->scratch;
    const size_t NH = (size_t)N * H * m->esize;

    /* MLP branch: y = h + act Wdown^T. act is not needed after its weight gradient,
     * so its buffer takes d(act) (this block's activations are dead after its
     * backward, or recomputed for the next block with checkpointing). */
    void *dact = a->act;
    linear_bwd(m, dact, g->g[FT_BLK_DOWN], dy, a->act, p->w[FT_BLK_DOWN], N, H, I, 0.0f);
    be->ops->swiglu_bwd(be, m->dt, s->dgate, s->dup, dact, a->gate, a->up, (size_t)N * I);
    linear_bwd(m, s->dxn, g->g[FT_BLK_GATE], s->dgate, a->xn2, p->w[FT_BLK_GATE], N, I, H, 0.0f);
    linear_bwd(m, s->dxn, g->g[FT_BLK_UP], s->dup, a->xn2, p->w[FT_BLK_UP], N, I, H, 1.0f);
    be->ops->copy(be, s->dh, dy, NH); /* residual path */
    be->ops->rmsnorm_bwd(be, m->dt, m->gt, s->dh, g->g[FT_BLK_MLP_NORM], s->dxn, a->h, p->w[FT_BLK_MLP_NORM],
                         a->rstd2, N, H);

    /* Attention branch: h = x + att Wo^T */
    linear_bwd(m, s->datt, g->g[FT_BLK_O], s->dh, a->att, p->w[FT_BLK_O], N, H, Q, 0.0f);
    be->ops->attention_bwd(be, m->dt, s->dq, s->dk, s->dv, s->datt, a->att, a->lse, a->q, a->k, a->v,
                           seg, m->attn);
    project_rotate_bwd(m, s->dxn, g->g[FT_BLK_Q], g->g[FT_BLK_Q_BIAS], g->g[FT_BLK_Q_NORM], s->dq,
                       s->dq_raw, a->q_raw, a->rstd_q, a->xn1, p->w[FT_BLK_Q],
                       p->w[FT_BLK_Q_NORM], c->num_attention_heads, 0.0f);
    project_rotate_bwd(m, s->dxn, g->g[FT_BLK_K], g->g[FT_BLK_K_BIAS], g->g[FT_BLK_K_NORM], s->dk,
                       s->dk_raw, a->k_raw, a->rstd_k, a->xn1, p->w[FT_BLK_K],
                       p->w[FT_BLK_K_NORM], c->num_key_value_heads, 1.0f);
    if (g->g[FT_BLK_V_BIAS])
        be->ops->bias_grad(be, m->dt, m->gt, g->g[FT_BLK_V_BIAS], s->dv, N, KV);
    linear_bwd(m, s->dxn, g->g[FT_BLK_V], s->dv, a->xn1, p->w[FT_BLK_V], N, KV, H, 1.0f);
    be->ops->copy(be, dx, s->dh, NH);
    be->ops->rmsnorm_bwd(be, m->dt, m->gt, dx, g->g[FT_BLK_ATTN_NORM], s->dxn, x, p->w[FT_BLK_ATTN_NORM],
                         a->rstd1, N, H);
}
