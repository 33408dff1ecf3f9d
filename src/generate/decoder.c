#include "generate/decoder.h"

#include <stdlib.h>
#include <string.h>

#include "model/family_norm.h"
#include "model/rope_tables.h"

#define DEFAULT_MAX_CHUNK 256

struct ft_decoder {
    const ft_model_layout *layout;
    ft_backend *be;
    ft_param_source src;
    ft_decoder_options opt;
    ft_kv_cache cache;
    float *rope_cos, *rope_sin; /* [capacity, rot_dim/2] */
    int32_t *ids, *pos;         /* [max_chunk] on the backend */
    int32_t *host_i32;          /* [2 * max_chunk] staging */
    /* activations of one chunk of n <= max_chunk tokens */
    float *x;                   /* [n, H] residual stream: block input, then output */
    float *xn, *rstd, *mean;    /* [n, H] normalised input of a branch, [n] its 1/rms (1/std)
                                 * and (LayerNorm) mean */
    float *q, *att, *lse;       /* [n, Q], [n, Q], [n_heads, n] */
    float *h;                   /* [n, H] residual after attention */
    float *gate, *up, *act;     /* [n, I] (gate: SwiGLU only) */
    float *xf, *rstd_f, *mean_f, *logits; /* head of the last token: [H], [1], [1], [V] */
    float *proj, *rstd_qk;      /* qk_norm only: q or k before its norm [n, Q], 1/rms [n, nh] */
};

/* ---------------------------------------------------------------- lifetime */

static float *balloc(ft_decoder *d, size_t n, int *failed)
{
    if (*failed)
        return NULL;
    float *p = d->be->ops->alloc(d->be, (n ? n : 1) * sizeof(float));
    if (!p)
        *failed = 1;
    return p;
}

int ft_decoder_create(ft_decoder **out, const ft_model_layout *layout, ft_backend *be,
                      const ft_param_source *src, const ft_decoder_options *opt, ft_error *err)
{
    *out = NULL;
    const ft_model_config *c = &layout->config;
    if (opt->capacity < 1 || opt->capacity > c->max_position_embeddings)
        return ft_fail(err, "decoder: capacity %d outside 1..max_position_embeddings (%d)",
                       opt->capacity, c->max_position_embeddings);
    ft_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return ft_fail(err, "out of host memory");
    d->layout = layout;
    d->be = be;
    d->src = *src;
    d->opt = *opt;
    if (d->opt.max_chunk <= 0)
        d->opt.max_chunk = DEFAULT_MAX_CHUNK;
    if (d->opt.max_chunk > d->opt.capacity)
        d->opt.max_chunk = d->opt.capacity;
    if (ft_kv_cache_init(&d->cache, be, c, opt->capacity, err)) {
        free(d);
        return -1;
    }

    const size_t N = (size_t)d->opt.max_chunk, H = (size_t)c->hidden_size;
    const size_t I = (size_t)c->intermediate_size, V = (size_t)c->vocab_size;
    const size_t Q = (size_t)c->num_attention_heads * (size_t)c->head_dim;
    const size_t half = (size_t)ft_model_rot_dim(c) / 2, cap = (size_t)d->opt.capacity;
    int failed = 0;
    d->rope_cos = balloc(d, cap * half, &failed);
    d->rope_sin = balloc(d, cap * half, &failed);
    d->ids = (int32_t *)balloc(d, N, &failed);
    d->pos = (int32_t *)balloc(d, N, &failed);
    d->x = balloc(d, N * H, &failed);
    d->xn = balloc(d, N * H, &failed);
    d->rstd = balloc(d, N, &failed);
    d->mean = balloc(d, N, &failed);
    d->mean_f = balloc(d, 1, &failed);
    d->q = balloc(d, N * Q, &failed);
    d->att = balloc(d, N * Q, &failed);
    d->lse = balloc(d, N * (size_t)c->num_attention_heads, &failed);
    d->h = balloc(d, N * H, &failed);
    if (!ft_model_family_of(c)->gelu_mlp) /* GELU MLPs have no gate */
        d->gate = balloc(d, N * I, &failed);
    d->up = balloc(d, N * I, &failed);
    d->act = balloc(d, N * I, &failed);
    d->xf = balloc(d, H, &failed);
    d->rstd_f = balloc(d, 1, &failed);
    d->logits = balloc(d, V, &failed);
    if (ft_model_family_of(c)->qk_norm) {
        d->proj = balloc(d, N * Q, &failed);
        d->rstd_qk = balloc(d, N * (size_t)c->num_attention_heads, &failed);
    }
    d->host_i32 = malloc(2 * N * sizeof(int32_t));
    float *cos_h = malloc(cap * half * sizeof(float) + 1);
    float *sin_h = malloc(cap * half * sizeof(float) + 1);
    if (failed || !d->host_i32 || !cos_h || !sin_h) {
        free(cos_h);
        free(sin_h);
        ft_decoder_free(d);
        return ft_fail(err, "decoder: out of memory for activations of %zu tokens on the %s "
                       "backend", N, be->name);
    }
    /* The trainer's tables, row p = position p: the same fp32 angles. */
    ft_rope_tables(c, d->opt.capacity, cos_h, sin_h);
    be->ops->upload(be, d->rope_cos, cos_h, cap * half * sizeof(float));
    be->ops->upload(be, d->rope_sin, sin_h, cap * half * sizeof(float));
    be->ops->sync(be);
    free(cos_h);
    free(sin_h);
    *out = d;
    return 0;
}

void ft_decoder_free(ft_decoder *d)
{
    if (!d)
        return;
    ft_backend *be = d->be;
    float *bufs[] = { d->rope_cos, d->rope_sin, (float *)d->ids, (float *)d->pos, d->x, d->xn,
                      d->rstd, d->q, d->att, d->lse, d->h, d->gate, d->up, d->act, d->xf,
                      d->rstd_f, d->logits, d->proj, d->rstd_qk, d->mean, d->mean_f };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    ft_kv_cache_free(&d->cache);
    free(d->host_i32);
    free(d);
}

void ft_decoder_reset(ft_decoder *d) { ft_kv_cache_reset(&d->cache); }
int ft_decoder_len(const ft_decoder *d) { return d->cache.len; }
int ft_decoder_capacity(const ft_decoder *d) { return d->cache.capacity; }
int ft_decoder_vocab(const ft_decoder *d) { return d->layout->config.vocab_size; }

/* ---------------------------------------------------------------- forward */

/* z[n,out] (+)= a[n,in] W^T, W stored [out, in] as in HF. */
static void linear_fwd(ft_backend *be, float *z, const float *a, const float *w, int n, int out,
                       int in, float beta)
{
    be->ops->matmul(be, FT_GEMM_F32, z, a, w, n, out, in, false, true, 1.0f, beta);
}

static void add_bias(ft_backend *be, float *y, const float *b, int n, int dim)
{
    if (b)
        be->ops->bias_add(be, FT_DTYPE_F32, FT_DTYPE_F32, y, b, n, dim);
}

/* y = the family's norm of x (n rows), in fp32. */
static void norm_fwd(ft_decoder *d, float *y, float *mean, float *rstd, const float *x,
                     const float *w, const float *b, int n)
{
    ft_family_norm_fwd(d->be, &d->layout->config, FT_DTYPE_F32, y, mean, rstd, x, w, b, n);
}

/* z = RoPE(QKNorm(xn W^T + b)) over n_heads heads: block.c's project_rotate. */
static void project_rotate(ft_decoder *d, float *z, const float *w, const float *bias,
                           const float *norm_w, int n, int n_heads)
{
    ft_backend *be = d->be;
    const ft_model_config *c = &d->layout->config;
    const int H = c->hidden_size, hd = c->head_dim, out = n_heads * hd;
    float *proj = norm_w ? d->proj : z;
    linear_fwd(be, proj, d->xn, w, n, out, H, 0.0f);
    add_bias(be, proj, bias, n, out);
    if (norm_w)
        be->ops->rmsnorm_fwd(be, FT_DTYPE_F32, z, d->rstd_qk, proj, norm_w, n * n_heads, hd,
                             (float)c->rms_norm_eps);
    be->ops->rope(be, FT_DTYPE_F32, z, d->rope_cos, d->rope_sin, d->pos, n, n_heads,
                  ft_model_rope_shape(c), false);
}

/* One block on the chunk's n tokens at positions past .. past+n-1; x is replaced by
 * the block's output. Mirrors ft_block_forward (src/model/block.c) op by op; the
 * only difference is where k and v go (the cache) and which attention reads them. */
static void block_forward(ft_decoder *d, int layer, const float *flat, int past, int n)
{
    ft_backend *be = d->be;
    const ft_model_config *c = &d->layout->config;
    const ft_unit_layout *u = &d->layout->units[ft_layout_block_unit(layer)];
    const float *w[FT_BLK_N_TENSORS];
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        w[i] = u->slot[i] >= 0 ? flat + u->tensors[u->slot[i]].offset : NULL;
    const int H = c->hidden_size, I = c->intermediate_size, nh = c->num_attention_heads;
    const int nkv = c->num_key_value_heads, hd = c->head_dim;
    const int Q = nh * hd, KV = nkv * hd;
    const ft_family_info *fam = ft_model_family_of(c);
    const bool parallel = ft_model_parallel_residual(c);
    float *k_new = ft_kv_cache_k(&d->cache, layer, past);
    float *v_new = ft_kv_cache_v(&d->cache, layer, past);

    /* attention branch: h = x + Attn(norm1(x)) */
    norm_fwd(d, d->xn, d->mean, d->rstd, d->x, w[FT_BLK_ATTN_NORM], w[FT_BLK_ATTN_NORM_BIAS], n);
    project_rotate(d, d->q, w[FT_BLK_Q], w[FT_BLK_Q_BIAS], w[FT_BLK_Q_NORM], n, nh);
    project_rotate(d, k_new, w[FT_BLK_K], w[FT_BLK_K_BIAS], w[FT_BLK_K_NORM], n, nkv);
    linear_fwd(be, v_new, d->xn, w[FT_BLK_V], n, KV, H, 0.0f);
    add_bias(be, v_new, w[FT_BLK_V_BIAS], n, KV);
    if (past == 0) {
        /* the whole sequence so far is this chunk: the trainer's attention */
        ft_attn_shape s = { .batch = 1, .seq_len = n, .n_heads = nh, .n_kv_heads = nkv,
                            .head_dim = hd, .window = c->sliding_window };
        be->ops->attention_fwd(be, FT_DTYPE_F32, d->att, d->lse, d->q, d->cache.k[layer], d->cache.v[layer],
                               NULL, s);
    } else {
        be->ops->attention_decode(be, FT_DTYPE_F32, d->att, d->q, d->cache.k[layer], d->cache.v[layer], past,
                                  n, nh, nkv, hd, c->sliding_window);
    }
    be->ops->copy(be, d->h, d->x, (size_t)n * H * sizeof(float));
    linear_fwd(be, d->h, d->att, w[FT_BLK_O], n, H, Q, 1.0f);
    add_bias(be, d->h, w[FT_BLK_O_BIAS], n, H);

    /* MLP branch: x = h + MLP(xn), xn = norm2(h) (sequential), norm2(x) (parallel; x
     * is still the block input) or norm1(x) (shared norm: xn already holds it) */
    if (!fam->shared_norm)
        norm_fwd(d, d->xn, d->mean, d->rstd, parallel ? d->x : d->h, w[FT_BLK_MLP_NORM],
                 w[FT_BLK_MLP_NORM_BIAS], n);
    linear_fwd(be, d->up, d->xn, w[FT_BLK_UP], n, I, H, 0.0f);
    if (fam->gelu_mlp) {
        add_bias(be, d->up, w[FT_BLK_UP_BIAS], n, I);
        be->ops->gelu_fwd(be, FT_DTYPE_F32, c->gelu_tanh ? FT_GELU_TANH : FT_GELU_ERF, d->act,
                          d->up, (size_t)n * I);
    } else {
        linear_fwd(be, d->gate, d->xn, w[FT_BLK_GATE], n, I, H, 0.0f);
        be->ops->swiglu_fwd(be, FT_DTYPE_F32, d->act, d->gate, d->up, (size_t)n * I);
    }
    be->ops->copy(be, d->x, d->h, (size_t)n * H * sizeof(float));
    linear_fwd(be, d->x, d->act, w[FT_BLK_DOWN], n, H, I, 1.0f);
    add_bias(be, d->x, w[FT_BLK_DOWN_BIAS], n, H);
}

/* Final norm and output projection of the chunk's last token into d->logits. */
static void head_forward(ft_decoder *d, int n)
{
    ft_backend *be = d->be;
    const ft_model_layout *lay = d->layout;
    const ft_model_config *c = &lay->config;
    const int hu = ft_layout_head_unit(lay);
    const ft_unit_layout *head = &lay->units[hu];
    const float *hp = d->src.acquire(d->src.ctx, hu);
#define AT(t) (head->slot[t] >= 0 ? hp + ft_unit_slot_offset(head, t) : NULL)
    const float *w_out = c->tie_word_embeddings ? d->src.acquire(d->src.ctx, 0) : AT(FT_HEAD_LM);
    const float *last = d->x + (size_t)(n - 1) * c->hidden_size;
    norm_fwd(d, d->xf, d->mean_f, d->rstd_f, last, AT(FT_HEAD_NORM), AT(FT_HEAD_NORM_BIAS), 1);
    linear_fwd(be, d->logits, d->xf, w_out, 1, c->vocab_size, c->hidden_size, 0.0f);
    add_bias(be, d->logits, AT(FT_HEAD_LM_BIAS), 1, c->vocab_size);
#undef AT
    if (c->tie_word_embeddings)
        d->src.release(d->src.ctx, 0);
    d->src.release(d->src.ctx, hu);
}

/* Embedding and blocks of one chunk; appends its k/v to the cache. */
static void chunk_forward(ft_decoder *d, const int32_t *ids, int n)
{
    ft_backend *be = d->be;
    const ft_model_layout *lay = d->layout;
    const int past = d->cache.len, L = lay->config.num_hidden_layers;
    int32_t *pos_h = d->host_i32 + d->opt.max_chunk;
    memcpy(d->host_i32, ids, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        pos_h[i] = past + i;
    be->ops->upload(be, d->ids, d->host_i32, (size_t)n * sizeof(int32_t));
    be->ops->upload(be, d->pos, pos_h, (size_t)n * sizeof(int32_t));

    const float *emb = d->src.acquire(d->src.ctx, 0);
    be->ops->embedding_fwd(be, FT_DTYPE_F32, d->x, emb, d->ids, n, lay->config.hidden_size);
    d->src.release(d->src.ctx, 0);
    for (int l = 0; l < L; l++) {
        const int u = ft_layout_block_unit(l);
        block_forward(d, l, d->src.acquire(d->src.ctx, u), past, n);
        d->src.release(d->src.ctx, u);
    }
    d->cache.len = past + n;
}

int ft_decoder_append(ft_decoder *d, const int32_t *ids, int n, float *logits_host,
                      ft_error *err)
{
    const ft_model_config *c = &d->layout->config;
    if (n < 1)
        return ft_fail(err, "decoder: nothing to append");
    if (n > d->cache.capacity - d->cache.len)
        return ft_fail(err, "sequence of %d tokens does not fit the KV cache of %d positions",
                       d->cache.len + n, d->cache.capacity);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return ft_fail(err, "token id %d is outside the model's vocabulary (vocab_size %d)",
                           (int)ids[i], c->vocab_size);
    int done = 0;
    while (done < n) {
        const int m = n - done < d->opt.max_chunk ? n - done : d->opt.max_chunk;
        chunk_forward(d, ids + done, m);
        done += m;
        if (done == n)
            head_forward(d, m);
    }
    d->be->ops->download(d->be, logits_host, d->logits, (size_t)c->vocab_size * sizeof(float));
    d->be->ops->sync(d->be);
    return 0;
}
