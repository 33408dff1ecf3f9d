/* LoRA terms of the block's projections (block_lora.h). With s = alpha / rank,
 * d = drop(a) (the identity without dropout) and u = d A^T [N, r] kept from the forward:
 *   forward   z  += s u B^T
 *   backward  dB += s dz^T u,  du = s dz B,  dA += du^T d,  da += drop(du A)
 * (drop's Jacobian is diagonal: the same mask and 1/(1-p) scale). d is not kept: it is
 * written into scratch->lora_drop where it is needed, from the mask's seed (lora.h).
 * Operands are in the context's dtype, A and B's gradients in the gradient type with
 * fp32 accumulation, as the base weights' gradients are. */
#include "model/block_lora.h"

_Static_assert((int)FT_LORA_Q == (int)FT_BLK_Q && (int)FT_LORA_K == (int)FT_BLK_K &&
                   (int)FT_LORA_V == (int)FT_BLK_V && (int)FT_LORA_O == (int)FT_BLK_O &&
                   (int)FT_LORA_GATE == (int)FT_BLK_GATE && (int)FT_LORA_UP == (int)FT_BLK_UP &&
                   (int)FT_LORA_DOWN == (int)FT_BLK_DOWN,
               "a projection's own site has its ft_block_tensor's value");

/* Where the adapter of projection proj is: its site, the first row of B that feeds
 * proj, the widths, and whether proj opens (computes u / writes du with beta 0) and
 * closes (finishes dA and da) the site. */
typedef struct lora_view {
    int site;
    long long in, out, row0;
    bool opens, closes;
} lora_view;

static bool lora_view_of(const ft_block_ctx *bc, const ft_block_params *p, int proj,
                         lora_view *v)
{
    const ft_lora_params *l = p->lora;
    if (!l || proj > FT_BLK_DOWN)
        return false;
    const ft_model_config *c = bc->config;
    long long in, out;
    if (l->a[proj]) {
        ft_lora_site_dims(c, (ft_lora_site)proj, &in, &out);
        *v = (lora_view){ proj, in, out, 0, true, true };
        return true;
    }
    if ((proj == FT_BLK_Q || proj == FT_BLK_K || proj == FT_BLK_V) && l->a[FT_LORA_QKV]) {
        const long long q = (long long)c->num_attention_heads * c->head_dim;
        const long long kv = (long long)c->num_key_value_heads * c->head_dim;
        *v = (lora_view){ FT_LORA_QKV, c->hidden_size, proj == FT_BLK_Q ? q : kv,
                          proj == FT_BLK_Q ? 0 : proj == FT_BLK_K ? q : q + kv,
                          proj == FT_BLK_Q, proj == FT_BLK_V };
        return true;
    }
    return false;
}

/* The adapter's input: a, or drop(a) written into the scratch buffer. */
static const void *adapter_input(const ft_block_ctx *bc, const ft_lora_params *l,
                                 const lora_view *v, const void *a)
{
    if (l->dropout.p <= 0.0)
        return a;
    void *d = bc->scratch->lora_drop;
    bc->be->ops->dropout(bc->be, bc->dt, d, a, bc->tokens, (int)v->in,
                         ft_lora_dropout_mask(&l->dropout, (ft_lora_site)v->site), false);
    return d;
}

/* B's rows that feed the view's projection. */
static const void *b_rows(const ft_block_ctx *bc, const ft_lora_params *l, const lora_view *v)
{
    return (const char *)l->b[v->site] + (size_t)(v->row0 * l->rank) * ft_dtype_size(bc->dt);
}

/* u[N, r] = drop(a) A^T where the view opens its site. */
static void make_u(const ft_block_ctx *bc, const ft_lora_params *l, ft_block_acts *acts,
                   const lora_view *v, const void *a)
{
    if (!v->opens)
        return;
    const ft_gemm_types t = { bc->dt, bc->dt, bc->dt };
    bc->be->ops->matmul(bc->be, t, acts->lora_u[v->site], adapter_input(bc, l, v, a),
                        l->a[v->site], bc->tokens, l->rank, (int)v->in, false, true, 1.0f, 0.0f);
}

void ft_block_lora_keep_u(const ft_block_ctx *bc, const ft_block_params *p, ft_block_acts *acts,
                          int proj, const void *a)
{
    lora_view v;
    if (lora_view_of(bc, p, proj, &v))
        make_u(bc, p->lora, acts, &v, a);
}

void ft_block_lora_fwd(const ft_block_ctx *bc, const ft_block_params *p, ft_block_acts *acts,
                       int proj, void *z, const void *a)
{
    lora_view v;
    if (!lora_view_of(bc, p, proj, &v))
        return;
    const ft_lora_params *l = p->lora;
    const ft_gemm_types t = { bc->dt, bc->dt, bc->dt };
    make_u(bc, l, acts, &v, a);
    /* z[N, out] += s u B^T */
    bc->be->ops->matmul(bc->be, t, z, acts->lora_u[v.site], b_rows(bc, l, &v), bc->tokens,
                        (int)v.out, l->rank, false, true, l->scale, 1.0f);
}

void ft_block_lora_bwd_weights(const ft_block_ctx *bc, const ft_block_params *p,
                               ft_block_grads *g, ft_block_acts *acts, int proj, const void *dz,
                               const void *a)
{
    lora_view v;
    if (!lora_view_of(bc, p, proj, &v))
        return;
    ft_backend *be = bc->be;
    const ft_lora_params *l = p->lora;
    const ft_gemm_types t = { bc->dt, bc->dt, bc->dt }, tg = { bc->dt, bc->dt, bc->gt };
    const int N = bc->tokens, r = l->rank;
    const void *u = acts->lora_u[v.site];
    void *du = bc->scratch->lora_du;
    /* dB[out, r] += s dz^T u (the rows of B this projection owns) */
    void *db = (char *)g->lora->b[v.site] + (size_t)(v.row0 * r) * ft_dtype_size(bc->gt);
    be->ops->matmul(be, tg, db, dz, u, (int)v.out, r, N, true, false, l->scale, 1.0f);
    /* du[N, r] (+)= s dz B */
    be->ops->matmul(be, t, du, dz, b_rows(bc, l, &v), N, r, (int)v.out, false, false, l->scale,
                    v.opens ? 0.0f : 1.0f);
    if (v.closes) /* dA[r, in] += du^T drop(a) */
        be->ops->matmul(be, tg, g->lora->a[v.site], du, adapter_input(bc, l, &v, a), r,
                        (int)v.in, N, true, false, 1.0f, 1.0f);
}

void ft_block_lora_bwd_input(const ft_block_ctx *bc, const ft_block_params *p, int proj, void *da)
{
    lora_view v;
    if (!lora_view_of(bc, p, proj, &v) || !v.closes)
        return;
    ft_backend *be = bc->be;
    const ft_lora_params *l = p->lora;
    const ft_gemm_types t = { bc->dt, bc->dt, bc->dt };
    const void *du = bc->scratch->lora_du;
    if (l->dropout.p <= 0.0) { /* da[N, in] += du A */
        be->ops->matmul(be, t, da, du, l->a[v.site], bc->tokens, (int)v.in, l->rank, false,
                        false, 1.0f, 1.0f);
        return;
    }
    /* da[N, in] += drop(du A), du A in the scratch (drop(a) there is no longer needed) */
    void *dd = bc->scratch->lora_drop;
    be->ops->matmul(be, t, dd, du, l->a[v.site], bc->tokens, (int)v.in, l->rank, false, false,
                    1.0f, 0.0f);
    be->ops->dropout(be, bc->dt, da, dd, bc->tokens, (int)v.in,
                     ft_lora_dropout_mask(&l->dropout, (ft_lora_site)v.site), true);
}
