/* One transformer block, forward and backward:
 *   h = x + Attn(RMSNorm(x) ; Wq, Wk, Wv, Wo)
 *   y = h + Wdown (silu(Wgate n) * (Wup n)),  n = RMSNorm(h)
 * Linear layers use HF's [out, in] weights: z = a W^T, so
 *   da = dz W  and  dW += dz^T a.
 */
#include "model/model_internal.h"

void ft_block_params_bind(const ft_unit_layout *u, const float *flat, ft_block_params *p)
{
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        p->w[i] = flat + u->tensors[i].offset;
}

void ft_block_grads_bind(const ft_unit_layout *u, float *flat, ft_block_grads *g)
{
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        g->g[i] = flat + u->tensors[i].offset;
}

/* z[N,out] (+)= a[N,in] W^T */
static void linear_fwd(ft_backend *be, float *z, const float *a, const float *w, int n, int out,
                       int in, float beta)
{
    be->ops->matmul(be, z, a, w, n, out, in, false, true, 1.0f, beta);
}

/* da[N,in] (+)= dz[N,out] W ;  dW[out,in] += dz^T a */
static void linear_bwd(ft_backend *be, float *da, float *dw, const float *dz, const float *a,
                       const float *w, int n, int out, int in, float beta_da)
{
    be->ops->matmul(be, da, dz, w, n, in, out, false, false, 1.0f, beta_da);
    be->ops->matmul(be, dw, dz, a, out, in, n, true, false, 1.0f, 1.0f);
}

void ft_block_forward(ft_model *m, const ft_block_params *p, const float *x, float *y,
                      ft_block_acts *a)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, I = c->intermediate_size;
    const int Q = c->num_attention_heads * c->head_dim;
    const int KV = c->num_key_value_heads * c->head_dim;
    const float eps = (float)c->rms_norm_eps;
    const int32_t *seg = m->in.has_segments ? m->in.segment : NULL;

    be->ops->rmsnorm_fwd(be, a->xn1, a->rstd1, x, p->w[FT_BLK_ATTN_NORM], N, H, eps);
    linear_fwd(be, a->q, a->xn1, p->w[FT_BLK_Q], N, Q, H, 0.0f);
    linear_fwd(be, a->k, a->xn1, p->w[FT_BLK_K], N, KV, H, 0.0f);
    linear_fwd(be, a->v, a->xn1, p->w[FT_BLK_V], N, KV, H, 0.0f);
    be->ops->rope(be, a->q, m->rope_cos, m->rope_sin, m->in.pos, N, c->num_attention_heads,
                  c->head_dim, false);
    be->ops->rope(be, a->k, m->rope_cos, m->rope_sin, m->in.pos, N, c->num_key_value_heads,
                  c->head_dim, false);
    be->ops->attention_fwd(be, a->att, a->lse, a->q, a->k, a->v, seg, m->attn);
    be->ops->copy(be, a->h, x, (size_t)N * H * sizeof(float));
    linear_fwd(be, a->h, a->att, p->w[FT_BLK_O], N, H, Q, 1.0f);

    be->ops->rmsnorm_fwd(be, a->xn2, a->rstd2, a->h, p->w[FT_BLK_MLP_NORM], N, H, eps);
    linear_fwd(be, a->gate, a->xn2, p->w[FT_BLK_GATE], N, I, H, 0.0f);
    linear_fwd(be, a->up, a->xn2, p->w[FT_BLK_UP], N, I, H, 0.0f);
    be->ops->swiglu_fwd(be, a->act, a->gate, a->up, (size_t)N * I);
    be->ops->copy(be, y, a->h, (size_t)N * H * sizeof(float));
    linear_fwd(be, y, a->act, p->w[FT_BLK_DOWN], N, H, I, 1.0f);
}

void ft_block_backward(ft_model *m, const ft_block_params *p, ft_block_grads *g, const float *x,
                       const ft_block_acts *a, const float *dy, float *dx)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, I = c->intermediate_size;
    const int Q = c->num_attention_heads * c->head_dim;
    const int KV = c->num_key_value_heads * c->head_dim;
    const int32_t *seg = m->in.has_segments ? m->in.segment : NULL;
    ft_block_scratch *s = &m->scratch;
    const size_t NH = (size_t)N * H * sizeof(float);

    /* MLP branch: y = h + act Wdown^T */
    linear_bwd(be, s->dact, g->g[FT_BLK_DOWN], dy, a->act, p->w[FT_BLK_DOWN], N, H, I, 0.0f);
    be->ops->swiglu_bwd(be, s->dgate, s->dup, s->dact, a->gate, a->up, (size_t)N * I);
    linear_bwd(be, s->dxn, g->g[FT_BLK_GATE], s->dgate, a->xn2, p->w[FT_BLK_GATE], N, I, H, 0.0f);
    linear_bwd(be, s->dxn, g->g[FT_BLK_UP], s->dup, a->xn2, p->w[FT_BLK_UP], N, I, H, 1.0f);
    be->ops->copy(be, s->dh, dy, NH); /* residual path */
    be->ops->rmsnorm_bwd(be, s->dh, g->g[FT_BLK_MLP_NORM], s->dxn, a->h, p->w[FT_BLK_MLP_NORM],
                         a->rstd2, N, H);

    /* Attention branch: h = x + att Wo^T */
    linear_bwd(be, s->datt, g->g[FT_BLK_O], s->dh, a->att, p->w[FT_BLK_O], N, H, Q, 0.0f);
    be->ops->attention_bwd(be, s->dq, s->dk, s->dv, s->datt, a->att, a->lse, a->q, a->k, a->v,
                           seg, m->attn);
    /* The rotation is orthogonal: its backward is the rotation by -angle. */
    be->ops->rope(be, s->dq, m->rope_cos, m->rope_sin, m->in.pos, N, c->num_attention_heads,
                  c->head_dim, true);
    be->ops->rope(be, s->dk, m->rope_cos, m->rope_sin, m->in.pos, N, c->num_key_value_heads,
                  c->head_dim, true);
    linear_bwd(be, s->dxn, g->g[FT_BLK_Q], s->dq, a->xn1, p->w[FT_BLK_Q], N, Q, H, 0.0f);
    linear_bwd(be, s->dxn, g->g[FT_BLK_K], s->dk, a->xn1, p->w[FT_BLK_K], N, KV, H, 1.0f);
    linear_bwd(be, s->dxn, g->g[FT_BLK_V], s->dv, a->xn1, p->w[FT_BLK_V], N, KV, H, 1.0f);
    be->ops->copy(be, dx, s->dh, NH);
    be->ops->rmsnorm_bwd(be, dx, g->g[FT_BLK_ATTN_NORM], s->dxn, x, p->w[FT_BLK_ATTN_NORM],
                         a->rstd1, N, H);
}
