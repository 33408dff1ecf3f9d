/* One transformer block, forward and backward (block.h: the context it runs on, and
 * why training, evaluation and decoding share it). The Llama shape is
 *   h = x + Attn(Norm1(x) ; Wq, Wk, Wv, Wo)
 *   y = h + MLP(Norm2(h))
 * with Norm = RMSNorm and MLP(n) = Wdown (silu(Wgate n) * (Wup n)) (SwiGLU).
 * Linear layers use HF's [out, in] weights: z = a W^T (+ b), so
 *   da = dz W,  dW += dz^T a  and  db += sum over tokens of dz.
 *
 * The families (model/family.h) switch parts of it, never the structure:
 *   q = RoPE(QKNorm(n Wq^T + bq))     (k likewise; v = n Wv^T + bv)
 * with the biases b present for qwen2 and gpt_neox (attention_bias, which also
 * biases Wo), QKNorm an RMSNorm over each head's head_dim values with one
 * [head_dim] weight shared by the heads (qwen3: on the [tokens, heads*head_dim]
 * tensor it is the ordinary RMSNorm op on tokens*heads rows of head_dim), and RoPE
 * rotating the first rot_dim dims of a head, half-split or interleaved (gptj).
 * Mistral's sliding window is a field of the attention shape (attn.window of the
 * context).
 * The GPT families use LayerNorm with a bias for Norm and a GELU MLP with biases,
 *   MLP(n) = Wdown gelu(Wup n + bup) + bdown,
 * and a parallel residual (gpt_neox with parallel_residual, gptj always):
 *   y = x + Attn(Norm1(x)) + MLP(Norm2(x))
 * computed as h = x + Attn(Norm1(x)), y = h + MLP(Norm2(x)): the sequential code
 * with the MLP norm reading x instead of h. GPT-J has one norm for both branches
 * (Norm2 = Norm1: the MLP reads Norm1's output and its gradient joins the
 * attention's before Norm1's backward).
 */
#include "model/block.h"

#include "model/block_lora.h"
#include "model/family_norm.h"
#include "model/rope_tables.h"

void ft_block_params_bind(const ft_unit_layout *u, ft_dtype dt, const void *flat,
                          ft_block_params *p)
{
    p->lora = NULL;
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        p->w[i] = u->slot[i] >= 0
                      ? (const char *)flat + u->tensors[u->slot[i]].offset * ft_dtype_size(dt)
                      : NULL;
}

void ft_block_grads_bind(const ft_unit_layout *u, ft_dtype gt, void *flat, ft_block_grads *g)
{
    g->lora = NULL;
    g->first = false;
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        g->g[i] = flat && u->slot[i] >= 0 ? (char *)flat + u->tensors[u->slot[i]].offset * ft_dtype_size(gt)
                                  : NULL;
}

/* Allocation through the caller's function, stopping at the first failure. */
typedef struct acts_taker {
    ft_block_alloc_fn alloc;
    void *ctx;
    int failed;
} acts_taker;

static void *take(acts_taker *t, size_t bytes)
{
    void *p = NULL;
    if (!t->failed && !(p = t->alloc(t->ctx, bytes)))
        t->failed = 1;
    return p;
}

size_t ft_block_pair_offset(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* A GEMM pair's two buffers in one allocation (ft_block_pair_offset); the second is freed
 * with the first (ft_block_acts_free). */
static void take_pair(acts_taker *t, size_t bytes, void **first, void **second)
{
    const size_t step = ft_block_pair_offset(bytes);
    *first = take(t, step + bytes);
    *second = *first ? (char *)*first + step : NULL;
}

/* The adapter sites of the attention half (q, k, v and the output projection): their u
 * is kept with the attention part. */
static bool attention_site(int site)
{
    return site == FT_LORA_Q || site == FT_LORA_K || site == FT_LORA_V ||
           site == FT_LORA_QKV || site == FT_LORA_O;
}

/* The adapters' u [tokens, rank] of the targeted sites (attention_only: those of the
 * attention half). */
static void take_lora_u(acts_taker *t, ft_block_acts *a, const ft_lora_config *lora, ft_dtype dt,
                        size_t tokens, bool attention_only)
{
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        if ((!attention_only || attention_site(s)) && ft_lora_has_site(lora, (ft_lora_site)s))
            a->lora_u[s] = take(t, tokens * (size_t)lora->rank * ft_dtype_size(dt));
}

/* q, (k, v,) att, lse and the qk_norm forms: what attention reads and writes. */
static void take_attention(acts_taker *t, ft_block_acts *a, const ft_model_config *c,
                           ft_dtype dt, size_t N, bool with_kv)
{
    const size_t es = ft_dtype_size(dt), f4 = sizeof(float);
    const size_t nh = c->num_attention_heads, nkv = c->num_key_value_heads;
    const size_t Q = nh * c->head_dim, KV = nkv * c->head_dim;
    const bool qk_norm = ft_model_family_of(c)->qk_norm;
    a->q = take(t, N * Q * es);
    if (with_kv) { /* v beside what the K/V GEMM pair writes: k_raw with a QK norm, else k */
        if (qk_norm)
            a->k = take(t, N * KV * es);
        take_pair(t, N * KV * es, qk_norm ? &a->k_raw : &a->k, &a->v);
    }
    a->att = take(t, N * Q * es);
    a->lse = take(t, N * nh * f4);
    if (qk_norm) {
        a->q_raw = take(t, N * Q * es);
        if (!with_kv)
            a->k_raw = take(t, N * KV * es);
        a->rstd_q = take(t, N * nh * f4);
        a->rstd_k = take(t, N * nkv * f4);
    }
}

int ft_block_acts_alloc(ft_block_acts *a, const ft_model_config *c, ft_dtype dt, size_t tokens,
                        bool with_kv, ft_block_alloc_fn alloc, void *alloc_ctx)
{
    const ft_family_info *fam = ft_model_family_of(c);
    const size_t N = tokens, es = ft_dtype_size(dt), f4 = sizeof(float);
    const size_t H = c->hidden_size, I = c->intermediate_size;
    acts_taker t = { alloc, alloc_ctx, 0 };
    *a = (ft_block_acts){ 0 };
    a->xn1 = take(&t, N * H * es);
    a->rstd1 = take(&t, N * f4);
    take_attention(&t, a, c, dt, N, with_kv);
    a->h = take(&t, N * H * es);
    if (!fam->shared_norm) {
        a->xn2 = take(&t, N * H * es);
        a->rstd2 = take(&t, N * f4);
    }
    if (fam->layernorm) {
        a->mean1 = take(&t, N * f4);
        if (!fam->shared_norm)
            a->mean2 = take(&t, N * f4);
    }
    if (!fam->gelu_mlp)
        take_pair(&t, N * I * es, &a->gate, &a->up);
    else
        a->up = take(&t, N * I * es);
    a->act = take(&t, N * I * es);
    return t.failed;
}

int ft_block_attention_acts_alloc(ft_block_acts *a, const ft_model_config *c,
                                  const ft_lora_config *lora, ft_ckpt_keep keep, ft_dtype dt,
                                  size_t tokens, ft_block_alloc_fn alloc, void *alloc_ctx)
{
    acts_taker t = { alloc, alloc_ctx, 0 };
    *a = (ft_block_acts){ 0 };
    if (keep == FT_CKPT_KEEP_ATTENTION_OUTPUT) {
        a->att = take(&t, tokens * (size_t)c->num_attention_heads * c->head_dim *
                              ft_dtype_size(dt));
        a->lse = take(&t, tokens * (size_t)c->num_attention_heads * sizeof(float));
        return t.failed;
    }
    take_attention(&t, a, c, dt, tokens, true);
    if (!ft_model_parallel_residual(c)) /* h feeds Norm2 (parallel: only y, not rebuilt) */
        a->h = take(&t, tokens * (size_t)c->hidden_size * ft_dtype_size(dt));
    if (lora)
        take_lora_u(&t, a, lora, dt, tokens, true);
    return t.failed;
}

/* kept's buffer where it has one, else shared's */
static void *kept_or(void *kept, void *shared) { return kept ? kept : shared; }
static float *kept_or_f32(float *kept, float *shared) { return kept ? kept : shared; }

void ft_block_acts_with_attention(ft_block_acts *view, const ft_block_acts *shared,
                                  const ft_block_acts *kept)
{
    *view = *shared;
    view->q = kept_or(kept->q, shared->q);
    view->k = kept_or(kept->k, shared->k);
    view->v = kept_or(kept->v, shared->v);
    view->att = kept_or(kept->att, shared->att);
    view->lse = kept_or_f32(kept->lse, shared->lse);
    view->q_raw = kept_or(kept->q_raw, shared->q_raw);
    view->k_raw = kept_or(kept->k_raw, shared->k_raw);
    view->rstd_q = kept_or_f32(kept->rstd_q, shared->rstd_q);
    view->rstd_k = kept_or_f32(kept->rstd_k, shared->rstd_k);
    view->h = kept_or(kept->h, shared->h);
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        if (attention_site(s))
            view->lora_u[s] = kept_or(kept->lora_u[s], shared->lora_u[s]);
}

void ft_block_acts_free(ft_backend *be, ft_block_acts *a)
{
    /* v lives in k's (or k_raw's) allocation and a SwiGLU's up in gate's (take_pair); a
     * decoder's k and v (its cache's rows) are NULL again by now */
    void *v_own = a->k || a->k_raw ? NULL : a->v, *up_own = a->gate ? NULL : a->up;
    void *bufs[] = { a->xn1, a->q,     a->k,     v_own,    a->att,   a->h,      a->xn2,
                     a->gate, up_own,  a->act,   a->q_raw, a->k_raw, a->rstd1,  a->lse,
                     a->rstd2, a->rstd_q, a->rstd_k, a->mean1, a->mean2 };
    _Static_assert(sizeof bufs + sizeof a->lora_u == sizeof *a,
                   "free every buffer of ft_block_acts");
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        be->ops->free(be, a->lora_u[s]);
    *a = (ft_block_acts){ 0 };
}

int ft_block_lora_acts_alloc(ft_block_acts *a, const ft_lora_config *lora, ft_dtype dt,
                             size_t tokens, ft_block_alloc_fn alloc, void *alloc_ctx)
{
    acts_taker t = { alloc, alloc_ctx, 0 };
    take_lora_u(&t, a, lora, dt, tokens, false);
    return t.failed;
}

/* The GEMM types: everything in the context's dtype; a weight gradient's product
 * written as the gradient type. */
static ft_gemm_types gemm(const ft_block_ctx *bc)
{
    return (ft_gemm_types){ bc->dt, bc->dt, bc->dt };
}
static ft_gemm_types gemm_to_grad(const ft_block_ctx *bc)
{
    return (ft_gemm_types){ bc->dt, bc->dt, bc->gt };
}

static ft_gelu_kind gelu_of(const ft_model_config *c)
{
    return c->gelu_tanh ? FT_GELU_TANH : FT_GELU_ERF;
}

/* The family's norm (model/family_norm.h) in the context's storage types. */
static void norm_fwd(const ft_block_ctx *bc, void *y, float *mean, float *rstd, const void *x,
                     const void *w, const void *b, int rows)
{
    ft_family_norm_fwd(bc->be, bc->config, bc->dt, y, mean, rstd, x, w, b, rows);
}
/* A frozen weight's gradient goes to the scratch's sink (block.h). */
static void *grad_or_sink(const ft_block_ctx *bc, void *g, int half)
{
    if (g)
        return g;
    const size_t dim = (size_t)(bc->config->hidden_size > bc->config->head_dim
                                    ? bc->config->hidden_size
                                    : bc->config->head_dim);
    return (float *)bc->scratch->grad_sink + (size_t)half * dim;
}

/* dx = dx_base + Norm^T dy (family_norm.h) */
static void norm_bwd(const ft_block_ctx *bc, void *dx, const void *dx_base, void *dw, void *db,
                     const void *dy, const void *x, const void *w, const float *mean,
                     const float *rstd, int rows)
{
    const bool has_bias = ft_model_family_of(bc->config)->layernorm;
    ft_family_norm_bwd(bc->be, bc->config, bc->dt, bc->gt, dx, dx_base, grad_or_sink(bc, dw, 0),
                       has_bias ? grad_or_sink(bc, db, 1) : db, dy, x, w, mean, rstd, rows);
}

/* out = attention of q over the keys it sees: the context's hook (the KV cache), or
 * the full-sequence flash attention of the batch. */
static void attend(const ft_block_ctx *bc, void *out, float *lse, const void *q, const void *k,
                   const void *v)
{
    if (bc->attend)
        bc->attend(bc->attend_ctx, bc, out, lse, q, k, v);
    else
        bc->be->ops->attention_fwd(bc->be, bc->dt, out, lse, q, k, v, bc->segment, bc->attn);
}

/* z[N,out] (+)= a[N,in] W^T */
static void linear_fwd(const ft_block_ctx *bc, void *z, const void *a, const void *w, int n,
                       int out, int in, float beta)
{
    bc->be->ops->matmul(bc->be, gemm(bc), z, a, w, n, out, in, false, true, 1.0f, beta);
}

/* z0 = a W0^T and z1 = a W1^T ([N,out] each): two projections of one input (K and V,
 * gate and up) in one backend call, one launch on CUDA (backend.h, matmul_pair). */
static void linear_fwd_pair(const ft_block_ctx *bc, void *z0, const void *w0, void *z1,
                            const void *w1, const void *a, int n, int out, int in)
{
    bc->be->ops->matmul_pair(bc->be, gemm(bc), z0, z1, a, a, w0, w1, n, out, in, false, true,
                             1.0f, 0.0f);
}

/* z[N,out] = r[N,out] + a[N,in] W^T: a projection onto the residual stream r, summed in
 * the GEMM (backend.h, matmul_add) rather than after a copy of r into z. */
static void linear_fwd_residual(const ft_block_ctx *bc, void *z, const void *r, const void *a,
                                const void *w, int n, int out, int in)
{
    bc->be->ops->matmul_add(bc->be, gemm(bc), z, r, a, w, n, out, in, false, true);
}

/* Backward of projection proj (an ft_block_tensor) given dz:
 * dW[out,in] += dz^T a (fp32 accumulation, stored as the gradient type; = when g->first,
 * each 2-D weight having this one GEMM a micro-batch; none for a frozen block), the
 * adapter's terms, and da[N,in] (+)= dz[N,out] W (+ du A) unless da
 * is NULL (nobody reads it: block.h, skip_input_grad).
 * Everything that reads a comes first: da may then overwrite a (the MLP's down
 * projection reuses the SwiGLU output's buffer for its gradient). */
static void linear_bwd_input(const ft_block_ctx *bc, const ft_block_params *p,
                             const ft_block_grads *g, int proj, void *da, const void *dz, int n,
                             int out, int in, float beta_da)
{
    if (!da)
        return;
    bc->be->ops->matmul(bc->be, gemm(bc), da, dz, p->w[proj], n, in, out, false, false, 1.0f,
                        beta_da);
    if (g->lora)
        ft_block_lora_bwd_input(bc, p, proj, da);
}

static void linear_bwd_weights(const ft_block_ctx *bc, const ft_block_params *p,
                               ft_block_grads *g, ft_block_acts *acts, int proj, const void *dz,
                               const void *a, int n, int out, int in)
{
    ft_backend *be = bc->be;
    if (g->g[proj])
        be->ops->matmul(be, gemm_to_grad(bc), g->g[proj], dz, a, out, in, n, true, false, 1.0f,
                        g->first ? 0.0f : 1.0f);
    if (g->lora)
        ft_block_lora_bwd_weights(bc, p, g, acts, proj, dz, a);
}

static void linear_bwd(const ft_block_ctx *bc, const ft_block_params *p, ft_block_grads *g,
                       ft_block_acts *acts, int proj, void *da, const void *dz, const void *a,
                       int n, int out, int in, float beta_da)
{
    linear_bwd_weights(bc, p, g, acts, proj, dz, a, n, out, in);
    linear_bwd_input(bc, p, g, proj, da, dz, n, out, in, beta_da);
}

/* linear_bwd of two projections of one input a (those of linear_fwd_pair): dW0 and dW1 in
 * one backend call, then da (+)= dz0 W0 (beta_da) and da += dz1 W1, the order two
 * linear_bwd calls sum in. An adapter's backward keeps its own order (each site's weights
 * then input: they share the du scratch), so with adapters the two run one after the
 * other; the base weights of an adapted block are frozen anyway. */
static void linear_bwd_pair(const ft_block_ctx *bc, const ft_block_params *p, ft_block_grads *g,
                            ft_block_acts *acts, int proj0, const void *dz0, int proj1,
                            const void *dz1, const void *a, void *da, int n, int out, int in,
                            float beta_da)
{
    if (g->lora || !g->g[proj0] || !g->g[proj1]) {
        linear_bwd(bc, p, g, acts, proj0, da, dz0, a, n, out, in, beta_da);
        linear_bwd(bc, p, g, acts, proj1, da, dz1, a, n, out, in, 1.0f);
        return;
    }
    bc->be->ops->matmul_pair(bc->be, gemm_to_grad(bc), g->g[proj0], g->g[proj1], dz0, dz1, a, a,
                             out, in, n, true, false, 1.0f, g->first ? 0.0f : 1.0f);
    linear_bwd_input(bc, p, g, proj0, da, dz0, n, out, in, beta_da);
    linear_bwd_input(bc, p, g, proj1, da, dz1, n, out, in, 1.0f);
}

/* y[N,dim] += b (when the layer has a bias) */
static void add_bias(const ft_block_ctx *bc, void *y, const void *b, int n, int dim)
{
    if (b)
        bc->be->ops->bias_add(bc->be, bc->dt, bc->dt, y, b, n, dim);
}

/* db += column sums of dy (when the layer has a bias) */
static void bias_bwd(const ft_block_ctx *bc, void *db, const void *dy, int n, int dim)
{
    if (db)
        bc->be->ops->bias_grad(bc->be, bc->dt, bc->gt, db, dy, n, dim);
}

/* Where the projection of q (or k) is written: z, or z_raw when a QK norm follows. */
static void *qk_projection(void *z, void *z_raw, const void *norm_w)
{
    return norm_w ? z_raw : z;
}

/* The rest of z = QKNorm(a W^T + b (+ LoRA)) for q (or k: proj), n_heads heads, once the
 * GEMM has written a W^T into qk_projection(z, z_raw, norm_w): the bias, the adapter and
 * the norm (z_raw normalised into z). RoPE follows for q and k together (rotate_qk). */
static void project_qk_finish(const ft_block_ctx *bc, const ft_block_params *p,
                              ft_block_acts *acts, int proj_id, void *z, void *z_raw,
                              float *rstd, const void *a, const void *bias, const void *norm_w,
                              int n_heads)
{
    ft_backend *be = bc->be;
    const ft_model_config *c = bc->config;
    const int N = bc->tokens, out = n_heads * c->head_dim;
    void *proj = qk_projection(z, z_raw, norm_w);
    add_bias(bc, proj, bias, N, out);
    ft_block_lora_fwd(bc, p, acts, proj_id, proj, a);
    if (norm_w)
        be->ops->rmsnorm_fwd(be, bc->dt, z, rstd, proj, norm_w, N * n_heads, c->head_dim,
                             (float)c->rms_norm_eps);
}

/* RoPE of q and k in place (inverse: by -angle, the backward, the rotation being
 * orthogonal), both in one backend call. */
static void rotate_qk(const ft_block_ctx *bc, void *q, void *k, bool inverse)
{
    const ft_model_config *c = bc->config;
    bc->be->ops->rope_qk(bc->be, bc->dt, q, c->num_attention_heads, k, c->num_key_value_heads,
                         bc->rope_cos, bc->rope_sin, bc->pos, bc->tokens, ft_model_rope_shape(c),
                         inverse);
}

/* Backward of project_qk_finish given dz (the attention's dq or dk, rotated back by
 * rotate_qk; destroyed): returns the projection's gradient, QKNorm^T dz written into
 * dz_raw (qk_norm) or dz itself, with the bias and norm grads accumulated. The weight's
 * and the input's gradients are linear_bwd's (or linear_bwd_pair's). */
static void *project_qk_finish_bwd(const ft_block_ctx *bc, void *db, void *dnorm_w, void *dz,
                                   void *dz_raw, const void *z_raw, const float *rstd,
                                   const void *norm_w, int n_heads)
{
    const ft_model_config *c = bc->config;
    const int N = bc->tokens, out = n_heads * c->head_dim;
    void *dproj = dz;
    if (norm_w) {
        bc->be->ops->rmsnorm_bwd(bc->be, bc->dt, bc->gt, dz_raw, NULL,
                                 grad_or_sink(bc, dnorm_w, 0), dz, z_raw, norm_w, rstd,
                                 N * n_heads, c->head_dim);
        dproj = dz_raw;
    }
    bias_bwd(bc, db, dproj, N, out);
    return dproj;
}

/* Whether act waits for the backward (block.h, act_in_backward). */
static bool act_from_backward(const ft_block_ctx *bc, const ft_block_params *p)
{
    return bc->act_in_backward && !ft_model_family_of(bc->config)->gelu_mlp &&
           !(p->lora && p->lora->a[FT_LORA_DOWN]);
}

/* y = residual + MLP(n): SwiGLU, or GELU with biases. */
static void mlp_fwd(const ft_block_ctx *bc, const ft_block_params *p, const void *n,
                    ft_block_acts *a, const void *residual, void *y)
{
    ft_backend *be = bc->be;
    const ft_model_config *c = bc->config;
    const int N = bc->tokens, H = c->hidden_size, I = c->intermediate_size;
    const bool gelu = ft_model_family_of(c)->gelu_mlp;
    if (gelu)
        linear_fwd(bc, a->up, n, p->w[FT_BLK_UP], N, I, H, 0.0f);
    else /* gate and up: one product pair of one input */
        linear_fwd_pair(bc, a->gate, p->w[FT_BLK_GATE], a->up, p->w[FT_BLK_UP], n, N, I, H);
    add_bias(bc, a->up, p->w[FT_BLK_UP_BIAS], N, I);
    ft_block_lora_fwd(bc, p, a, FT_BLK_UP, a->up, n);
    if (gelu) {
        be->ops->gelu_fwd(be, bc->dt, gelu_of(bc->config), a->act, a->up, (size_t)N * I);
    } else {
        ft_block_lora_fwd(bc, p, a, FT_BLK_GATE, a->gate, n);
        if (!(bc->rebuild_only && act_from_backward(bc, p)))
            be->ops->swiglu_fwd(be, bc->dt, a->act, a->gate, a->up, (size_t)N * I);
    }
    if (bc->rebuild_only) { /* nobody reads the output: only an adapter's u */
        ft_block_lora_keep_u(bc, p, a, FT_BLK_DOWN, a->act);
        return;
    }
    linear_fwd_residual(bc, y, residual, a->act, p->w[FT_BLK_DOWN], N, H, I);
    add_bias(bc, y, p->w[FT_BLK_DOWN_BIAS], N, H);
    ft_block_lora_fwd(bc, p, a, FT_BLK_DOWN, y, a->act);
}

/* Backward of mlp_fwd given dy: dn (+)= d/dn with beta_dn (none when dn is NULL),
 * weight and bias grads accumulate. a->act is not needed after its weight gradient, so its
 * buffer takes d(act) (this block's activations are dead after its backward, or recomputed
 * for the next block with checkpointing). When the recompute left act to the backward
 * (act_from_backward), d(act) goes into that buffer first and the SwiGLU backward writes
 * act over it as it goes, before the down projection's weight gradient reads it. */
static void mlp_bwd(const ft_block_ctx *bc, const ft_block_params *p, ft_block_grads *g,
                    const void *n, ft_block_acts *a, const void *dy, void *dn, float beta_dn)
{
    ft_backend *be = bc->be;
    const ft_model_config *c = bc->config;
    const int N = bc->tokens, H = c->hidden_size, I = c->intermediate_size;
    ft_block_scratch *s = bc->scratch;
    void *dact = a->act;
    const bool act_here = act_from_backward(bc, p);
    bias_bwd(bc, g->g[FT_BLK_DOWN_BIAS], dy, N, H);
    if (act_here)
        linear_bwd_input(bc, p, g, FT_BLK_DOWN, dact, dy, N, H, I, 0.0f);
    else
        linear_bwd(bc, p, g, a, FT_BLK_DOWN, dact, dy, a->act, N, H, I, 0.0f);
    if (ft_model_family_of(c)->gelu_mlp) {
        be->ops->gelu_bwd(be, bc->dt, gelu_of(bc->config), s->dup, dact, a->up, (size_t)N * I);
        bias_bwd(bc, g->g[FT_BLK_UP_BIAS], s->dup, N, I);
        linear_bwd(bc, p, g, a, FT_BLK_UP, dn, s->dup, n, N, I, H, beta_dn);
        return;
    }
    be->ops->swiglu_bwd(be, bc->dt, s->dgate, s->dup, dact, a->gate, a->up, (size_t)N * I,
                        act_here ? a->act : NULL);
    if (act_here)
        linear_bwd_weights(bc, p, g, a, FT_BLK_DOWN, dy, a->act, N, H, I);
    linear_bwd_pair(bc, p, g, a, FT_BLK_GATE, s->dgate, FT_BLK_UP, s->dup, n, dn, N, I, H,
                    beta_dn);
}

/* q, k, v from Norm1's output a->xn1 (with their adapters' u) and attention over them
 * into a->att, a->lse: with the output projection, what a recompute skips when the set
 * kept the attention half (block.h, kept), and attention alone what it skips when the set
 * kept attention's output. */
static void self_attention_fwd(const ft_block_ctx *bc, const ft_block_params *p, ft_block_acts *a)
{
    const ft_model_config *c = bc->config;
    const int N = bc->tokens, H = c->hidden_size;
    const int KV = c->num_key_value_heads * c->head_dim;
    const int Q = c->num_attention_heads * c->head_dim;
    linear_fwd(bc, qk_projection(a->q, a->q_raw, p->w[FT_BLK_Q_NORM]), a->xn1, p->w[FT_BLK_Q], N,
               Q, H, 0.0f);
    /* k and v: one [N, KV] product pair of one input (at Llama shapes too narrow to fill a
     * GPU alone) */
    linear_fwd_pair(bc, qk_projection(a->k, a->k_raw, p->w[FT_BLK_K_NORM]), p->w[FT_BLK_K], a->v,
                    p->w[FT_BLK_V], a->xn1, N, KV, H);
    project_qk_finish(bc, p, a, FT_BLK_Q, a->q, a->q_raw, a->rstd_q, a->xn1,
                      p->w[FT_BLK_Q_BIAS], p->w[FT_BLK_Q_NORM], c->num_attention_heads);
    project_qk_finish(bc, p, a, FT_BLK_K, a->k, a->k_raw, a->rstd_k, a->xn1,
                      p->w[FT_BLK_K_BIAS], p->w[FT_BLK_K_NORM], c->num_key_value_heads);
    rotate_qk(bc, a->q, a->k, false);
    add_bias(bc, a->v, p->w[FT_BLK_V_BIAS], N, KV);
    ft_block_lora_fwd(bc, p, a, FT_BLK_V, a->v, a->xn1);
    /* a recompute that kept attention's output and lse has them as the forward left them */
    if (!(bc->rebuild_only && bc->kept == FT_CKPT_KEEP_ATTENTION_OUTPUT))
        attend(bc, a->att, a->lse, a->q, a->k, a->v);
}

void ft_block_forward(const ft_block_ctx *bc, const ft_block_params *p, const void *x, void *y,
                      ft_block_acts *a)
{
    const ft_model_config *c = bc->config;
    const ft_family_info *fam = ft_model_family_of(c);
    const int N = bc->tokens, H = c->hidden_size;
    const int Q = c->num_attention_heads * c->head_dim;

    norm_fwd(bc, a->xn1, a->mean1, a->rstd1, x, p->w[FT_BLK_ATTN_NORM],
                      p->w[FT_BLK_ATTN_NORM_BIAS], N);
    const bool kept = bc->rebuild_only && bc->kept == FT_CKPT_KEEP_ATTENTION;
    if (!kept)
        self_attention_fwd(bc, p, a);
    const bool parallel = ft_model_parallel_residual(c);
    if (kept) {
        /* h and the output projection's u are kept too: the MLP half is all there is to
         * rebuild */
    } else if (bc->rebuild_only && parallel) { /* h only feeds y (the MLP reads x) */
        ft_block_lora_keep_u(bc, p, a, FT_BLK_O, a->att);
    } else {
        linear_fwd_residual(bc, a->h, x, a->att, p->w[FT_BLK_O], N, H, Q);
        add_bias(bc, a->h, p->w[FT_BLK_O_BIAS], N, H);
        ft_block_lora_fwd(bc, p, a, FT_BLK_O, a->h, a->att);
    }

    /* the MLP's input: Norm2(h), Norm2(x) (parallel), or Norm1(x) itself (shared) */
    const void *xn2 = a->xn1;
    if (!fam->shared_norm) {
        const void *mlp_in = parallel ? x : a->h;
        norm_fwd(bc, a->xn2, a->mean2, a->rstd2, mlp_in, p->w[FT_BLK_MLP_NORM],
                          p->w[FT_BLK_MLP_NORM_BIAS], N);
        xn2 = a->xn2;
    }
    mlp_fwd(bc, p, xn2, a, a->h, y);
}

/* Whether this backward computes dx (block.h, skip_input_grad): trained norms reading
 * the block's input need the gradient of their output, which is dx's first part. */
static bool input_grad_wanted(const ft_block_ctx *bc, const ft_block_grads *g)
{
    return !bc->skip_input_grad || g->g[FT_BLK_ATTN_NORM] || g->g[FT_BLK_ATTN_NORM_BIAS] ||
           g->g[FT_BLK_MLP_NORM] || g->g[FT_BLK_MLP_NORM_BIAS];
}

void ft_block_backward(const ft_block_ctx *bc, const ft_block_params *p, ft_block_grads *g,
                       const void *x, ft_block_acts *a, const void *dy, void *dx)
{
    ft_backend *be = bc->be;
    const ft_model_config *c = bc->config;
    const ft_family_info *fam = ft_model_family_of(c);
    const bool parallel = ft_model_parallel_residual(c);
    const int N = bc->tokens, H = c->hidden_size;
    const int Q = c->num_attention_heads * c->head_dim;
    const int KV = c->num_key_value_heads * c->head_dim;
    ft_block_scratch *s = bc->scratch;
    /* Without dx, the input's norms' backward and the GEMMs feeding only them go: q, k,
     * v's input gradients, and with a parallel residual the MLP's (sequential: the
     * MLP's feeds h's gradient, which the attention branch needs). */
    const bool want_dx = input_grad_wanted(bc, g);
    void *dxn = want_dx ? s->dxn : NULL;

    /* MLP branch: y = h + MLP(n2). Its gradient wrt n2 lands in dxn; with a shared
     * norm it stays there and the attention's q/k/v gradients add to it. */
    mlp_bwd(bc, p, g, fam->shared_norm ? a->xn1 : a->xn2, a, dy, parallel ? dxn : s->dxn, 0.0f);
    /* The residual path: dL/dh is dy, plus Norm2's backward for the sequential residual;
     * dx is the attention's Norm1 backward added to dx_base. The norms' backward adds to
     * its base buffer, so no copy of dy starts either sum (dx and dy are distinct). */
    const void *dh = dy, *dx_base = dy;
    if (parallel && want_dx && !fam->shared_norm) {
        /* y = x + attn + mlp: dx = dy + Norm2's backward wrt x */
        norm_bwd(bc, dx, dy, g->g[FT_BLK_MLP_NORM], g->g[FT_BLK_MLP_NORM_BIAS], s->dxn, x,
                 p->w[FT_BLK_MLP_NORM], a->mean2, a->rstd2, N);
        dx_base = dx;
    } else if (!parallel) {
        norm_bwd(bc, s->dh, dy, g->g[FT_BLK_MLP_NORM], g->g[FT_BLK_MLP_NORM_BIAS], s->dxn, a->h,
                 p->w[FT_BLK_MLP_NORM], a->mean2, a->rstd2, N);
        dh = dx_base = s->dh;
    }

    /* Attention branch: h = x + att Wo^T (+ bo) */
    bias_bwd(bc, g->g[FT_BLK_O_BIAS], dh, N, H);
    linear_bwd(bc, p, g, a, FT_BLK_O, s->datt, dh, a->att, N, H, Q, 0.0f);
    be->ops->attention_bwd(be, bc->dt, s->dq, s->dk, s->dv, s->datt, a->att, a->lse, a->q, a->k,
                           a->v, bc->segment, bc->attn);
    const float beta_q = fam->shared_norm ? 1.0f : 0.0f; /* keep the MLP's dn1 */
    rotate_qk(bc, s->dq, s->dk, true);
    const void *dq = project_qk_finish_bwd(bc, g->g[FT_BLK_Q_BIAS], g->g[FT_BLK_Q_NORM], s->dq,
                                           s->dq_raw, a->q_raw, a->rstd_q, p->w[FT_BLK_Q_NORM],
                                           c->num_attention_heads);
    linear_bwd(bc, p, g, a, FT_BLK_Q, dxn, dq, a->xn1, N, Q, H, beta_q);
    const void *dk = project_qk_finish_bwd(bc, g->g[FT_BLK_K_BIAS], g->g[FT_BLK_K_NORM], s->dk,
                                           s->dk_raw, a->k_raw, a->rstd_k, p->w[FT_BLK_K_NORM],
                                           c->num_key_value_heads);
    bias_bwd(bc, g->g[FT_BLK_V_BIAS], s->dv, N, KV);
    linear_bwd_pair(bc, p, g, a, FT_BLK_K, dk, FT_BLK_V, s->dv, a->xn1, dxn, N, KV, H, 1.0f);
    if (!want_dx)
        return;
    norm_bwd(bc, dx, dx_base, g->g[FT_BLK_ATTN_NORM], g->g[FT_BLK_ATTN_NORM_BIAS], s->dxn, x,
             p->w[FT_BLK_ATTN_NORM], a->mean1, a->rstd1, N);
}
