#include "generate/decoder.h"

#include <stdlib.h>
#include <string.h>

#include "model/block.h"
#include "model/family_norm.h"
#include "model/head_logits.h"
#include "model/rope_tables.h"

#define DEFAULT_MAX_CHUNK 256

struct ft_decoder {
    const ft_model_layout *layout;
    ft_backend *be;
    ft_param_source src;
    ft_decoder_options opt;
    ft_dtype dt;                /* opt.dtype: parameters, activations, cache */
    ft_kv_cache cache;
    float *rope_cos, *rope_sin; /* [capacity, rot_dim/2] */
    int32_t *ids, *pos;         /* [max_chunk] on the backend */
    int32_t *host_i32;          /* [2 * max_chunk] staging */
    /* one chunk of n <= max_chunk tokens: the residual stream ping-pongs between
     * x[0] and x[1] (a block's output must not alias its input); k and v of acts
     * point into the cache, layer by layer */
    void *x[2];                 /* [n, H] */
    int cur;                    /* x[cur] holds the current residual stream */
    ft_block_acts acts;
    int layer, past;            /* what the attention hook of the block in flight reads */
    void *xf;                   /* head of the last token: final norm [H] */
    float *rstd_f, *mean_f, *logits; /* [1], [1], [V] fp32 */
    bool has_adapters;          /* LoRA: adapters applied in every block */
    ft_lora_adapters adapters;
};

/* ---------------------------------------------------------------- lifetime */

static void *balloc(void *ctx, size_t bytes)
{
    ft_backend *be = ctx;
    return be->ops->alloc(be, bytes ? bytes : 1);
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
    d->dt = opt->dtype;
    if (d->opt.max_chunk <= 0)
        d->opt.max_chunk = DEFAULT_MAX_CHUNK;
    if (d->opt.max_chunk > d->opt.capacity)
        d->opt.max_chunk = d->opt.capacity;
    if (ft_kv_cache_init(&d->cache, be, c, d->dt, opt->capacity, err)) {
        free(d);
        return -1;
    }

    const size_t N = (size_t)d->opt.max_chunk, H = (size_t)c->hidden_size;
    const size_t V = (size_t)c->vocab_size, es = ft_dtype_size(d->dt);
    const size_t half = (size_t)ft_model_rot_dim(c) / 2, cap = (size_t)d->opt.capacity;
    int failed = ft_block_acts_alloc(&d->acts, c, d->dt, N, false, balloc, be);
    void **bufs[] = { (void **)&d->rope_cos, (void **)&d->rope_sin, (void **)&d->ids,
                      (void **)&d->pos,      &d->x[0],              &d->x[1],
                      &d->xf,                (void **)&d->rstd_f,   (void **)&d->mean_f,
                      (void **)&d->logits };
    const size_t bytes[] = { cap * half * 4, cap * half * 4, N * 4, N * 4, N * H * es, N * H * es,
                             H * es,         4,              4,     V * 4 };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && !failed; i++)
        failed = !(*bufs[i] = balloc(be, bytes[i]));
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
    void *bufs[] = { d->rope_cos, d->rope_sin, d->ids, d->pos,   d->x[0],
                     d->x[1],     d->xf,       d->rstd_f, d->mean_f, d->logits };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    ft_block_acts_free(be, &d->acts);
    ft_kv_cache_free(&d->cache);
    free(d->host_i32);
    free(d);
}

void ft_decoder_reset(ft_decoder *d) { ft_kv_cache_reset(&d->cache); }

int ft_decoder_set_adapters(ft_decoder *d, const ft_lora_adapters *adapters, ft_error *err)
{
    if (adapters->layout->n_units != d->layout->config.num_hidden_layers)
        return ft_fail(err, "decoder: adapters for %d layers on a model of %d",
                       adapters->layout->n_units, d->layout->config.num_hidden_layers);
    if (ft_block_lora_acts_alloc(&d->acts, adapters->lora, d->dt, (size_t)d->opt.max_chunk,
                                 balloc, d->be))
        return ft_fail(err, "decoder: cannot allocate the adapters' activations on the %s "
                       "backend", d->be->name);
    d->adapters = *adapters;
    d->has_adapters = true;
    return 0;
}
int ft_decoder_len(const ft_decoder *d) { return d->cache.len; }
int ft_decoder_capacity(const ft_decoder *d) { return d->cache.capacity; }
int ft_decoder_vocab(const ft_decoder *d) { return d->layout->config.vocab_size; }

/* ---------------------------------------------------------------- forward */

/* The block's attention against the cache. ft_block_forward has written this
 * chunk's k and v into cache rows past..past+n-1 (acts.k/v point there). A chunk that
 * starts the sequence is the whole sequence so far: the trainer's flash attention
 * over it; later chunks and single steps read every cached row. */
static void attend_cache(void *hook_ctx, const ft_block_ctx *b, void *out, float *lse,
                         const void *q, const void *k, const void *v)
{
    (void)k;
    (void)v;
    ft_decoder *d = hook_ctx;
    ft_backend *be = d->be;
    const ft_model_config *c = b->config;
    const int nh = c->num_attention_heads, nkv = c->num_key_value_heads, hd = c->head_dim;
    const void *kc = d->cache.k[d->layer], *vc = d->cache.v[d->layer];
    if (d->past == 0) {
        ft_attn_shape s = { .batch = 1, .seq_len = b->tokens, .n_heads = nh, .n_kv_heads = nkv,
                            .head_dim = hd, .window = c->sliding_window };
        be->ops->attention_fwd(be, b->dt, out, lse, q, kc, vc, NULL, s);
    } else {
        be->ops->attention_decode(be, b->dt, out, q, kc, vc, d->past, b->tokens, nh, nkv, hd,
                                  c->sliding_window);
    }
}

/* Final norm and output projection (the trainer's, model/head_logits.h) of the
 * chunk's last token into d->logits: fp32 logits from operands in the decoder's
 * dtype. */
static void head_forward(ft_decoder *d, int n)
{
    ft_backend *be = d->be;
    const ft_model_layout *lay = d->layout;
    const ft_model_config *c = &lay->config;
    const size_t es = ft_dtype_size(d->dt);
    const int hu = ft_layout_head_unit(lay);
    const ft_unit_layout *head = &lay->units[hu];
    const char *hp = d->src.acquire(d->src.ctx, hu);
#define AT(t) (head->slot[t] >= 0 ? hp + (size_t)ft_unit_slot_offset(head, t) * es : NULL)
    const void *w_out = c->tie_word_embeddings ? d->src.acquire(d->src.ctx, 0) : AT(FT_HEAD_LM);
    const void *last = (const char *)d->x[d->cur] + (size_t)(n - 1) * c->hidden_size * es;
    ft_family_norm_fwd(be, c, d->dt, d->xf, d->mean_f, d->rstd_f, last, AT(FT_HEAD_NORM),
                       AT(FT_HEAD_NORM_BIAS), 1);
    ft_head_project(be, c, d->dt, d->logits, FT_DTYPE_F32, d->xf, w_out, AT(FT_HEAD_LM_BIAS),
                    1);
#undef AT
    if (c->tie_word_embeddings)
        d->src.release(d->src.ctx, 0);
    d->src.release(d->src.ctx, hu);
}

/* Embedding and blocks of one chunk (the trainer's ft_block_forward, attention
 * against the cache); appends its k/v to the cache. */
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

    const void *emb = d->src.acquire(d->src.ctx, 0);
    d->cur = 0;
    be->ops->embedding_fwd(be, d->dt, d->x[0], emb, d->ids, n, lay->config.hidden_size);
    d->src.release(d->src.ctx, 0);
    const ft_block_ctx bc = { .be = be, .config = &lay->config, .dt = d->dt, .gt = d->dt,
                              .rope_cos = d->rope_cos, .rope_sin = d->rope_sin, .pos = d->pos,
                              .tokens = n, .attend = attend_cache, .attend_ctx = d };
    d->past = past;
    for (int l = 0; l < L; l++) {
        const int u = ft_layout_block_unit(l);
        ft_block_params p;
        ft_block_params_bind(&lay->units[u], d->dt, d->src.acquire(d->src.ctx, u), &p);
        ft_lora_params lp;
        const ft_param_source *as = &d->adapters.src;
        if (d->has_adapters) {
            ft_lora_params_bind(&d->adapters.layout->units[l], d->adapters.lora, d->dt,
                                as->acquire(as->ctx, l), &lp);
            p.lora = &lp;
        }
        d->layer = l;
        d->acts.k = ft_kv_cache_k(&d->cache, l, past);
        d->acts.v = ft_kv_cache_v(&d->cache, l, past);
        ft_block_forward(&bc, &p, d->x[d->cur], d->x[1 - d->cur], &d->acts);
        d->cur = 1 - d->cur;
        if (d->has_adapters)
            as->release(as->ctx, l);
        d->src.release(d->src.ctx, u);
    }
    d->acts.k = d->acts.v = NULL; /* the cache's, not ours to free */
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
