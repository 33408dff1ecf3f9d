/* The model driver: buffers, batch staging, and the order of units in forward and
 * backward (see model.h for the protocol with the parameter source). */
#include <stdlib.h>
#include <string.h>

#include "backend/phase_time.h"
#include "model/model_internal.h"
#include "model/rope_tables.h"

/* ---------------------------------------------------------------- buffers */

/* Every activation buffer comes through here; a dry run (the memory planner) counts
 * the same buffers without allocating them. */
static void *alloc_bytes(ft_model *m, size_t bytes, int *failed)
{
    static float dry_run_token;
    if (*failed)
        return NULL;
    if (m->dry_run) {
        m->act_bytes += bytes;
        return &dry_run_token;
    }
    void *p = m->be->ops->alloc(m->be, bytes);
    if (!p)
        *failed = 1;
    else
        m->act_bytes += bytes;
    return p;
}

/* n elements of the model's dtype: activations and their gradients. */
static void *alloc_act(ft_model *m, size_t n, int *failed)
{
    return alloc_bytes(m, n * m->esize, failed);
}

/* A GEMM pair's gradients (dk and dv, dgate and dup), n elements each, in one allocation
 * (ft_block_pair_offset). ft_model_free frees the first. */
static void alloc_act_pair(ft_model *m, size_t n, void **first, void **second, int *failed)
{
    const size_t step = ft_block_pair_offset(n * m->esize);
    *first = alloc_bytes(m, step + n * m->esize, failed);
    *second = *first && !m->dry_run ? (char *)*first + step : NULL;
}

/* n fp32 elements: statistics, tables, loss weights, logits. */
static float *alloc_f32(ft_model *m, size_t n, int *failed)
{
    return alloc_bytes(m, n * sizeof(float), failed);
}

static int32_t *alloc_i32(ft_model *m, size_t n, int *failed)
{
    return alloc_bytes(m, n * sizeof(int32_t), failed);
}

/* The block's allocations go through alloc_bytes too (the planner counts them). */
typedef struct acts_alloc {
    ft_model *m;
    int failed;
} acts_alloc;

static void *alloc_for_block(void *ctx, size_t bytes)
{
    acts_alloc *aa = ctx;
    return alloc_bytes(aa->m, bytes, &aa->failed);
}

static size_t clamp_size(size_t v, size_t lo, size_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The head's groups and chunks (model.h, head.c) from its memory budget B, with the
 * group's logits made in place over its dlogits (dlogit_bytes each), one chunk a
 * group, or, with fp32_chunks, in a separate fp32 chunk buffer:
 *   in place:    group x V x dlogit_bytes <= B;
 *   fp32 chunks: chunk x V x 4 (an eighth of B) + group x V x 2 <= B.
 * In place the logits GEMM is one for the group: every chunk would read the whole
 * V x H weight again (525 MB at the 1B shape), and a GEMM of R rows does R FLOPs per
 * byte of it: below ~300 rows (an H100's FLOPs per byte of bandwidth) it waits on
 * memory. */
void ft_model_resolve_head_rows(ft_model_options *o, size_t V, size_t tokens, size_t dlogit_bytes,
                                bool fp32_chunks)
{
    const size_t B = o->head_budget_bytes ? o->head_budget_bytes : (size_t)256 << 20;
    const size_t floor_rows = tokens < FT_HEAD_MIN_GROUP_ROWS ? tokens : FT_HEAD_MIN_GROUP_ROWS;
    if (fp32_chunks && o->head_chunk_rows <= 0) {
        size_t rows = clamp_size(B / 8 / (V * 4), 1, tokens);
        /* A chunk's rows are the N of its logits GEMM, cut by cuBLASLt into tiles of 128
         * or 256: 327 rows run as 384 or 512, up to a third of the products wasted. Whole
         * tiles (the budget's rows rounded down) waste none and split 4096 tokens evenly. */
        if (rows >= FT_HEAD_CHUNK_ALIGN && rows < tokens)
            rows -= rows % FT_HEAD_CHUNK_ALIGN;
        o->head_chunk_rows = (int)rows;
    }
    if (o->head_group_rows <= 0) {
        const size_t chunk_bytes = fp32_chunks ? (size_t)o->head_chunk_rows * V * 4 : 0;
        const size_t left = B > chunk_bytes ? B - chunk_bytes : 0;
        o->head_group_rows = (int)clamp_size(left / (V * dlogit_bytes), floor_rows, tokens);
    }
    if (o->head_group_rows > (int)tokens)
        o->head_group_rows = (int)tokens;
    if (o->head_chunk_rows <= 0 || o->head_chunk_rows > o->head_group_rows)
        o->head_chunk_rows = o->head_group_rows;
}

/* Rows of the dlogits buffer: a group, rounded up to even so that ft_model_logits can
 * make fp32 logits, half as many rows, in it in the bf16 recipe. */
static size_t head_dlogits_rows(const ft_model *m)
{
    return ((size_t)m->opt.head_group_rows + 1) / 2 * 2;
}

/* fp32 logits apart from the group's dlogits: only where an output bias needs the fp32
 * dlogits for its gradient in the bf16 recipe (GPT-J); elsewhere the logits are made in
 * the activations' storage over their dlogits (head.c). */
static bool head_fp32_chunks(const ft_model *m)
{
    return m->dt != FT_DTYPE_F32 && ft_model_family_of(&m->layout.config)->lm_head_bias;
}

static void resolve_options(ft_model *m)
{
    m->dt = m->opt.dtype;
    m->esize = ft_dtype_size(m->dt);
    const long tokens = (long)m->opt.max_batch * m->opt.seq_len;
    ft_model_resolve_head_rows(&m->opt, (size_t)m->layout.config.vocab_size,
                               tokens > 0 ? (size_t)tokens : 1, m->esize, head_fp32_chunks(m));
    m->recomputed = ft_model_checkpointed_blocks(m->opt.activation_checkpointing,
                                                 m->opt.checkpoint_layers,
                                                 m->layout.config.num_hidden_layers);
}

int ft_model_checkpointed_blocks(bool activation_checkpointing, int checkpoint_layers,
                                 int layers)
{
    if (!activation_checkpointing)
        return 0;
    return checkpoint_layers > 0 && checkpoint_layers < layers ? checkpoint_layers : layers;
}

double ft_model_mean_keys(const ft_model_config *c, int seq_len)
{
    const double T = seq_len;
    const double W = c->sliding_window > 0 && c->sliding_window < T ? c->sliding_window : T;
    /* the mean of min(i + 1, W) over positions i < T */
    return W - W * (W - 1.0) / (2.0 * T);
}

double ft_model_recompute_flops(const ft_model_config *c, long tokens, int seq_len,
                                ft_ckpt_keep keep)
{
    const double N = (double)tokens, H = c->hidden_size, I = c->intermediate_size;
    const double Q = (double)c->num_attention_heads * c->head_dim;
    const double KV = (double)c->num_key_value_heads * c->head_dim;
    const ft_family_info *fam = ft_model_family_of(c);
    /* what the recompute of ft_block_forward runs (block.h, rebuild_only): the MLP
     * without its down projection; unless the attention half is kept, q, k, v and
     * (unless the residual is parallel) the output projection, and unless attention's
     * output is kept too, attention */
    double flops = 2.0 * N * H * I * (fam->gelu_mlp ? 1.0 : 2.0);
    if (keep == FT_CKPT_KEEP_ATTENTION)
        return flops;
    if (!ft_model_parallel_residual(c))
        flops += 2.0 * N * Q * H;
    flops += 2.0 * N * H * (Q + 2.0 * KV);
    if (keep == FT_CKPT_KEEP_NOTHING)
        flops += 4.0 * N * ft_model_mean_keys(c, seq_len) * Q;
    return flops;
}

/* Allocates (or, in a dry run, counts) every buffer; returns nonzero on failure. */
static int allocate_buffers(ft_model *m)
{
    const ft_model_config *c = &m->layout.config;
    const ft_model_options *opt = &m->opt;
    int failed = 0;
    const size_t N = (size_t)opt->max_batch * opt->seq_len;
    const size_t H = c->hidden_size, I = c->intermediate_size;
    const size_t Q = (size_t)c->num_attention_heads * c->head_dim;
    const size_t KV = (size_t)c->num_key_value_heads * c->head_dim;
    const int L = c->num_hidden_layers;

    const size_t half = (size_t)ft_model_rot_dim(c) / 2;
    m->rope_cos = alloc_f32(m, (size_t)opt->seq_len * half, &failed);
    m->rope_sin = alloc_f32(m, (size_t)opt->seq_len * half, &failed);
    m->in.ids = alloc_i32(m, N, &failed);
    m->in.targets = alloc_i32(m, N, &failed);
    m->in.segment = alloc_i32(m, N, &failed);
    m->in.pos = alloc_i32(m, N, &failed);
    m->in.weights = alloc_f32(m, N, &failed);

    m->block_in = calloc((size_t)L + 1, sizeof *m->block_in);
    m->plan = calloc(2 * (size_t)L + 4, sizeof *m->plan);
    m->n_act_sets = m->recomputed > 0 ? 1 + L - m->recomputed : (L > 0 ? L : 1);
    m->acts = calloc((size_t)m->n_act_sets, sizeof *m->acts);
    m->n_kept = opt->checkpoint_keep != FT_CKPT_KEEP_NOTHING && m->recomputed > 1
                    ? m->recomputed - 1 : 0;
    m->kept = calloc(m->n_kept > 0 ? (size_t)m->n_kept : 1, sizeof *m->kept);
    m->host_i32 = malloc(4 * N * sizeof(int32_t));
    m->host_f32 = malloc(2 * N * sizeof(float));
    m->host_pack = malloc(4 * N * sizeof(int32_t));
    if (!m->block_in || !m->plan || !m->acts || !m->kept || !m->host_i32 || !m->host_f32 ||
        !m->host_pack)
        failed = 1;
    for (int l = 0; l <= L && !failed; l++)
        m->block_in[l] = alloc_act(m, N * H, &failed);
    for (int i = 0; i < m->n_act_sets && !failed; i++) {
        acts_alloc aa = { m, 0 };
        failed = ft_block_acts_alloc(&m->acts[i], c, m->dt, N, true, alloc_for_block, &aa);
    }
    for (int l = 0; l < m->n_kept && !failed; l++) {
        acts_alloc aa = { m, 0 };
        failed = ft_block_attention_acts_alloc(&m->kept[l], c, opt->lora, opt->checkpoint_keep,
                                               m->dt, N, alloc_for_block, &aa);
    }

    ft_block_scratch *s = &m->scratch;
    s->dh = alloc_act(m, N * H, &failed);
    s->dxn = alloc_act(m, N * H, &failed);
    s->datt = alloc_act(m, N * Q, &failed);
    s->dq = alloc_act(m, N * Q, &failed);
    const bool qk_norm = ft_model_family_of(c)->qk_norm;
    if (qk_norm) /* the K/V pair's weight gradients read dk_raw */
        s->dk = alloc_act(m, N * KV, &failed);
    alloc_act_pair(m, N * KV, qk_norm ? &s->dk_raw : &s->dk, &s->dv, &failed);
    if (!ft_model_family_of(c)->gelu_mlp)
        alloc_act_pair(m, N * I, &s->dgate, &s->dup, &failed);
    else
        s->dup = alloc_act(m, N * I, &failed);
    if (qk_norm)
        s->dq_raw = alloc_act(m, N * Q, &failed);
    if (ft_lora_enabled(opt->lora)) {
        const size_t dim = H > (size_t)c->head_dim ? H : (size_t)c->head_dim;
        s->grad_sink = alloc_f32(m, 2 * dim, &failed);
        s->lora_du = alloc_act(m, N * (size_t)opt->lora->rank, &failed);
        if (opt->lora->dropout > 0.0)
            s->lora_drop = alloc_act(m, N * (size_t)ft_lora_widest_input(c, opt->lora), &failed);
        m->adapter_plan = calloc(2 * (size_t)(L > 0 ? L : 1), sizeof *m->adapter_plan);
        if (!m->adapter_plan)
            failed = 1;
        for (int i = 0; i < m->n_act_sets && !failed; i++) {
            acts_alloc aa = { m, 0 };
            failed = ft_block_lora_acts_alloc(&m->acts[i], opt->lora, m->dt, N, alloc_for_block,
                                              &aa);
        }
    }
    m->dres[0] = alloc_act(m, N * H, &failed);
    m->dres[1] = alloc_act(m, N * H, &failed);
    m->xf = alloc_act(m, N * H, &failed);
    m->rstd_f = alloc_f32(m, N, &failed);
    if (ft_model_family_of(c)->layernorm)
        m->mean_f = alloc_f32(m, N, &failed);
    m->dxf = alloc_act(m, N * H, &failed);
    const size_t V = c->vocab_size;
    if (head_fp32_chunks(m))
        m->logits = alloc_f32(m, (size_t)m->opt.head_chunk_rows * V, &failed);
    m->dlogits = alloc_act(m, head_dlogits_rows(m) * V, &failed);
    m->row_loss = alloc_f32(m, N, &failed);
    m->pack.live = alloc_i32(m, N, &failed);
    m->pack.inv = alloc_i32(m, N, &failed);
    m->pack.targets = alloc_i32(m, N, &failed);
    m->pack.weights = alloc_f32(m, N, &failed);
    /* The blocks' backward scratch is free while the head runs (before any block's
     * backward): the packed rows live there. dx has N rows although at most N - 1
     * are packed (else nothing is), so row n, the zero row, always exists. */
    m->pack.x = s->dh;
    m->pack.dx = s->dxn;
    return failed;
}

int ft_model_create(ft_model **out, const ft_model_layout *layout, ft_backend *be,
                    const ft_model_options *opt, ft_error *err)
{
    *out = NULL;
    const ft_model_config *c = &layout->config;
    if (opt->max_batch <= 0 || opt->seq_len <= 0)
        return ft_fail(err, "model: micro-batch and seq_len must be positive");
    if (opt->seq_len > c->max_position_embeddings)
        return ft_fail(err, "model: seq_len %d exceeds max_position_embeddings %d", opt->seq_len,
                       c->max_position_embeddings);
    ft_model *m = calloc(1, sizeof *m);
    if (!m)
        return ft_fail(err, "out of host memory");
    m->layout = *layout;
    m->be = be;
    m->opt = *opt;
    m->frozen = ft_lora_enabled(opt->lora);
    if (m->frozen && (!opt->adapter_layout ||
                      opt->adapter_layout->n_units != c->num_hidden_layers)) {
        free(m);
        return ft_fail(err, "model: LoRA needs the adapter layout of the model's %d layers",
                       c->num_hidden_layers);
    }
    resolve_options(m);
    m->attn = (ft_attn_shape){ .batch = opt->max_batch, .seq_len = opt->seq_len,
                               .n_heads = c->num_attention_heads,
                               .n_kv_heads = c->num_key_value_heads, .head_dim = c->head_dim,
                               .window = c->sliding_window };

    const size_t half = (size_t)ft_model_rot_dim(c) / 2;
    int failed = allocate_buffers(m);
    if (failed) {
        size_t want = m->act_bytes;
        ft_model_free(m);
        return ft_fail(err, "model: cannot allocate activations on the %s backend (%zu MiB "
                       "allocated before failing); reduce micro_batch_size or seq_len, or "
                       "checkpoint more blocks (activation_checkpointing, checkpoint_layers: "
                       "ftmpi --plan names the fastest setting that fits)", be->name, want >> 20);
    }

    float *cos_h = malloc((size_t)opt->seq_len * half * sizeof(float));
    float *sin_h = malloc((size_t)opt->seq_len * half * sizeof(float));
    if (!cos_h || !sin_h) {
        free(cos_h);
        free(sin_h);
        ft_model_free(m);
        return ft_fail(err, "out of host memory");
    }
    ft_rope_tables(c, opt->seq_len, cos_h, sin_h);
    be->ops->upload(be, m->rope_cos, cos_h, (size_t)opt->seq_len * half * sizeof(float));
    be->ops->upload(be, m->rope_sin, sin_h, (size_t)opt->seq_len * half * sizeof(float));
    be->ops->sync(be);
    free(cos_h);
    free(sin_h);
    *out = m;
    return 0;
}

void ft_model_free(ft_model *m)
{
    if (!m)
        return;
    ft_backend *be = m->be;
    const int L = m->layout.config.num_hidden_layers;
    if (m->block_in)
        for (int l = 0; l <= L; l++)
            be->ops->free(be, m->block_in[l]);
    if (m->acts)
        for (int i = 0; i < m->n_act_sets; i++)
            ft_block_acts_free(be, &m->acts[i]);
    if (m->kept)
        for (int l = 0; l < m->n_kept; l++)
            ft_block_acts_free(be, &m->kept[l]);
    m->scratch.dv = NULL; /* in dk's (dk_raw's) allocation, and a SwiGLU's dup in dgate's */
    if (m->scratch.dgate)
        m->scratch.dup = NULL;
    void **s = (void **)&m->scratch;
    for (size_t i = 0; i < sizeof m->scratch / sizeof(void *); i++)
        be->ops->free(be, s[i]);
    void *bufs[] = { m->rope_cos, m->rope_sin, m->in.ids,  m->in.targets, m->in.segment,
                     m->in.pos,   m->in.weights, m->dres[0], m->dres[1], m->xf,
                     m->rstd_f,   m->mean_f,   m->dxf,     m->logits,   m->dlogits,
                     m->row_loss, m->pack.live, m->pack.inv, m->pack.targets,
                     m->pack.weights };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->ops->free(be, bufs[i]);
    free(m->block_in);
    free(m->plan);
    free(m->adapter_plan);
    free(m->acts);
    free(m->kept);
    free(m->host_i32);
    free(m->host_f32);
    free(m->host_pack);
    free(m);
}

void ft_model_set_adapters(ft_model *m, const ft_param_source *adapters)
{
    m->adapters = *adapters;
}

size_t ft_model_activation_bytes(const ft_model *m) { return m->act_bytes; }

size_t ft_model_estimate_activation_bytes(const ft_model_layout *layout,
                                          const ft_model_options *opt)
{
    ft_model m;
    memset(&m, 0, sizeof m);
    m.layout = *layout;
    m.opt = *opt;
    m.dry_run = 1;
    resolve_options(&m);
    allocate_buffers(&m);
    free(m.block_in);
    free(m.plan);
    free(m.adapter_plan);
    free(m.acts);
    free(m.host_i32);
    free(m.host_f32);
    free(m.host_pack);
    return m.act_bytes;
}

/* ---------------------------------------------------------------- batch staging */

/* Splits dataset rows into inputs and shifted targets, derives RoPE positions that
 * restart at every document, validates ids, uploads. */
static int stage_batch(ft_model *m, const ft_host_batch *b, long *n_targets, ft_error *err)
{
    const int T = b->seq_len, B = b->batch, V = m->layout.config.vocab_size;
    if (T != m->opt.seq_len)
        return ft_fail(err, "model: batch seq_len %d differs from the model's %d", T,
                       m->opt.seq_len);
    if (B < 1 || B > m->opt.max_batch)
        return ft_fail(err, "model: batch of %d rows, model sized for 1..%d", B, m->opt.max_batch);
    const size_t N = (size_t)B * T;
    int32_t *ids = m->host_i32, *tgt = ids + N, *seg = tgt + N, *pos = seg + N;
    float *w = m->host_f32;
    long count = 0;
    for (int r = 0; r < B; r++) {
        const size_t row = (size_t)r * (T + 1);
        int32_t start = 0;
        for (int t = 0; t < T; t++) {
            const size_t i = (size_t)r * T + t;
            uint32_t id = b->tokens[row + t], next = b->tokens[row + t + 1];
            if (id >= (uint32_t)V || next >= (uint32_t)V)
                return ft_fail(err, "batch row %d position %d: token id %u is outside the "
                               "vocabulary (vocab_size %d); the dataset does not match the model",
                               r, id >= (uint32_t)V ? t : t + 1, id >= (uint32_t)V ? id : next, V);
            ids[i] = (int32_t)id;
            tgt[i] = (int32_t)next;
            w[i] = b->loss_mask[row + t + 1] ? 1.0f : 0.0f;
            count += b->loss_mask[row + t + 1] != 0;
            seg[i] = b->segment ? b->segment[row + t] : 0;
            if (t > 0 && seg[i] != seg[i - 1])
                start = t;
            pos[i] = t - start;
        }
    }
    ft_backend *be = m->be;
    be->ops->upload(be, m->in.ids, ids, N * sizeof(int32_t));
    be->ops->upload(be, m->in.targets, tgt, N * sizeof(int32_t));
    be->ops->upload(be, m->in.segment, seg, N * sizeof(int32_t));
    be->ops->upload(be, m->in.pos, pos, N * sizeof(int32_t));
    be->ops->upload(be, m->in.weights, w, N * sizeof(float));
    m->in.batch = B;
    m->in.seq_len = T;
    m->in.tokens = (int)N;
    m->in.has_segments = b->segment != NULL;
    m->attn.batch = B;
    be->ops->segment_hint(be, m->in.segment, seg, m->attn); /* no read-back per attention */
    ft_head_pack_live_rows(m); /* the head's index lists now, not mid-pass */
    *n_targets = count;
    return 0;
}

/* ---------------------------------------------------------------- passes */

/* Layer's set of activations: its own, or the one the recomputed blocks share, which
 * with kept attention parts is a view (into *view) of that set with the layer's own
 * attention part. */
static ft_block_acts *acts_for(ft_model *m, int layer, ft_block_acts *view)
{
    if (layer < m->n_kept) {
        ft_block_acts_with_attention(view, &m->acts[0], &m->kept[layer]);
        return view;
    }
    if (layer < m->recomputed)
        return &m->acts[0];
    return &m->acts[m->recomputed > 0 ? 1 + layer - m->recomputed : layer];
}

/* Tells the source the order of this pass's acquires: embedding, blocks, head (and
 * the embedding again when tied), then for training the blocks in reverse and the
 * embedding. */
static void announce_plan(ft_model *m, const ft_param_source *src, int train)
{
    if (!src->plan)
        return;
    const ft_model_layout *lay = &m->layout;
    const int L = lay->config.num_hidden_layers, tied = lay->config.tie_word_embeddings;
    int n = 0;
    int *order = m->plan;
    order[n++] = 0;
    for (int l = 0; l < L; l++)
        order[n++] = ft_layout_block_unit(l);
    order[n++] = ft_layout_head_unit(lay);
    if (tied)
        order[n++] = 0;
    if (train) {
        for (int l = L - 1; l >= 0; l--)
            order[n++] = ft_layout_block_unit(l);
        if (!m->frozen)
            order[n++] = 0;
    }
    src->plan(src->ctx, order, n);
    if (m->frozen && m->adapters.plan) {
        n = 0;
        for (int l = 0; l < L; l++)
            m->adapter_plan[n++] = l;
        for (int l = L - 1; train && l >= 0; l--)
            m->adapter_plan[n++] = l;
        m->adapters.plan(m->adapters.ctx, m->adapter_plan, n);
    }
}

/* Binds layer l's adapters (acquired from the adapter source) to p, and with g their
 * gradients; a no-op without LoRA. Release with release_adapters. */
typedef struct bound_adapters {
    ft_lora_params p;
    ft_lora_grads g;
} bound_adapters;

static void bind_adapters(ft_model *m, int l, bound_adapters *ba, ft_block_params *p,
                          ft_block_grads *g)
{
    if (!m->frozen)
        return;
    const ft_param_source *a = &m->adapters;
    const ft_unit_layout *u = &m->opt.adapter_layout->units[l];
    ft_lora_params_bind(u, m->opt.lora, m->dt, a->acquire(a->ctx, l), &ba->p);
    ba->p.dropout = m->lora_dropout;
    ba->p.dropout.layer = l;
    p->lora = &ba->p;
    if (g) {
        ft_lora_grads_bind(u, m->gt, a->grads(a->ctx, l), &ba->g);
        g->lora = &ba->g;
    }
}

static void release_adapters(ft_model *m, int l, bool grads_done)
{
    if (!m->frozen)
        return;
    if (grads_done)
        m->adapters.grad_done(m->adapters.ctx, l);
    m->adapters.release(m->adapters.ctx, l);
}

/* The block's view of the model for the current micro-batch: the full-sequence
 * attention of the staged batch. */
static ft_block_ctx block_ctx(ft_model *m)
{
    return (ft_block_ctx){ .be = m->be, .config = &m->layout.config, .dt = m->dt, .gt = m->gt,
                           .rope_cos = m->rope_cos, .rope_sin = m->rope_sin, .pos = m->in.pos,
                           .tokens = m->in.tokens, .attn = m->attn,
                           .segment = m->in.has_segments ? m->in.segment : NULL,
                           .scratch = &m->scratch };
}

/* Embedding and blocks; leaves the head input in block_in[L]. */
static void forward_blocks(ft_model *m, const ft_param_source *src)
{
    const ft_model_layout *lay = &m->layout;
    const int L = lay->config.num_hidden_layers, H = lay->config.hidden_size;
    /* the staged batch's ids: host copies in host_i32 (stage_batch) */
    const int32_t *ids = m->in.ids;
    const void *emb = src->acquire_rows ? src->acquire_rows(src->ctx, 0, m->host_i32,
                                                            (size_t)m->in.tokens, &ids)
                                        : src->acquire(src->ctx, 0);
    m->be->ops->embedding_fwd(m->be, m->dt, m->block_in[0], emb, ids, m->in.tokens, H);
    src->release(src->ctx, 0);
    const ft_block_ctx bc = block_ctx(m);
    for (int l = 0; l < L; l++) {
        const int u = ft_layout_block_unit(l);
        ft_block_params p;
        bound_adapters ba;
        ft_block_params_bind(&lay->units[u], m->dt, src->acquire(src->ctx, u), &p);
        bind_adapters(m, l, &ba, &p, NULL);
        ft_block_acts view;
        ft_block_forward(&bc, &p, m->block_in[l], m->block_in[l + 1], acts_for(m, l, &view));
        release_adapters(m, l, false);
        src->release(src->ctx, u);
    }
}

/* The head's tensors of a unit's flat parameters (hp) or gradients (hg; NULL for
 * parameters): lm_head, or the embedding's (emb) when tied. */
static ft_head_params bind_head(const ft_model *m, const void *hp, const void *emb)
{
    const ft_model_layout *lay = &m->layout;
    const ft_unit_layout *head = &lay->units[ft_layout_head_unit(lay)];
    ft_head_params p = { 0 };
#define AT(t) (head->slot[t] >= 0 ? ft_model_at(m, hp, (size_t)ft_unit_slot_offset(head, t)) \
                                        : NULL)
    p.w_out = lay->config.tie_word_embeddings ? emb : AT(FT_HEAD_LM);
    p.b_out = AT(FT_HEAD_LM_BIAS);
    p.w_norm = AT(FT_HEAD_NORM);
    p.b_norm = AT(FT_HEAD_NORM_BIAS);
#undef AT
    return p;
}

static ft_head_grads bind_head_grads(const ft_model *m, void *hg, void *emb_g)
{
    const ft_model_layout *lay = &m->layout;
    const ft_unit_layout *head = &lay->units[ft_layout_head_unit(lay)];
    ft_head_grads g = { 0 };
#define AT(t) (head->slot[t] >= 0 ? (char *)hg + ft_unit_slot_offset(head, t) * m->gsize \
                                        : NULL)
    g.w_out = lay->config.tie_word_embeddings ? emb_g : AT(FT_HEAD_LM);
    g.b_out = AT(FT_HEAD_LM_BIAS);
    g.w_norm = AT(FT_HEAD_NORM);
    g.b_norm = AT(FT_HEAD_NORM_BIAS);
#undef AT
    return g;
}

/* The unit's gradient for a caller that writes its 2-D weights' part itself: *first as
 * ft_param_source.grads_first, false from a source without it (grads() accumulates). */
static void *grads_to_write(const ft_param_source *src, int unit, bool *first)
{
    *first = false;
    return src->grads_first ? src->grads_first(src->ctx, unit, first) : src->grads(src->ctx, unit);
}

static void run_head(ft_model *m, const ft_param_source *src, float grad_scale, int train,
                     void *dx)
{
    const ft_model_layout *lay = &m->layout;
    const int hu = ft_layout_head_unit(lay);
    const int tied = lay->config.tie_word_embeddings;
    const void *hp = src->acquire(src->ctx, hu);
    const ft_head_params p = bind_head(m, hp, tied ? src->acquire(src->ctx, 0) : NULL);
    ft_head_grads g = { 0 };
    const bool head_grads = train && !m->frozen;
    if (head_grads) { /* w_out is the 2-D part of its unit: the head unit's, or the tied
                         embedding's (whose own backward then adds to what the head wrote) */
        bool first;
        if (tied) {
            void *emb = grads_to_write(src, 0, &first);
            g = bind_head_grads(m, src->grads(src->ctx, hu), emb);
        } else {
            g = bind_head_grads(m, grads_to_write(src, hu, &first), NULL);
        }
        g.w_out_first = first;
    }
    ft_head_forward_backward(m, &p, &g, m->block_in[lay->config.num_hidden_layers], dx,
                             grad_scale, train);
    if (head_grads)
        src->grad_done(src->ctx, hu);
    if (tied)
        src->release(src->ctx, 0);
    src->release(src->ctx, hu);
}

int ft_model_train_micro(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                         float grad_scale, double *loss_sum, long *n_targets, ft_error *err)
{
    if (stage_batch(m, b, n_targets, err))
        return -1;
    const ft_model_layout *lay = &m->layout;
    const int L = lay->config.num_hidden_layers, H = lay->config.hidden_size;
    ft_backend *be = m->be;
    m->gt = m->frozen ? m->adapters.grad_dtype : src->grad_dtype;
    m->gsize = ft_dtype_size(m->gt);
    if (m->gt != FT_DTYPE_F32 && m->gt != m->dt)
        return ft_fail(err, "model: %s gradients need the model to compute in %s",
                       ft_dtype_name(m->gt), ft_dtype_name(m->gt));

    if (m->frozen && m->opt.lora->dropout > 0.0) /* this pass only: cleared at its end */
        m->lora_dropout = (ft_lora_dropout){ .p = m->opt.lora->dropout,
                                             .seed = m->opt.lora_dropout_seed,
                                             .row0 = (uint64_t)b->first_sample * (uint64_t)b->seq_len };
    announce_plan(m, src, 1);
    ft_phase_begin(be, FT_PHASE_FORWARD);
    forward_blocks(m, src);
    ft_phase_end(be, FT_PHASE_FORWARD);
    void *dy = m->dres[0], *dx = m->dres[1];
    ft_phase_begin(be, FT_PHASE_HEAD);
    run_head(m, src, grad_scale, 1, dy);
    ft_phase_end(be, FT_PHASE_HEAD);

    ft_block_ctx bc = block_ctx(m);
    for (int l = L - 1; l >= 0; l--) {
        const int u = ft_layout_block_unit(l);
        ft_block_params p;
        ft_block_grads g;
        bound_adapters ba;
        bc.skip_input_grad = l == 0 && m->frozen; /* a frozen embedding takes no gradient */
        ft_block_params_bind(&lay->units[u], m->dt, src->acquire(src->ctx, u), &p);
        bool first = false;
        ft_block_grads_bind(&lay->units[u], m->gt,
                            m->frozen ? NULL : grads_to_write(src, u, &first), &g);
        g.first = first; /* the block's GEMMs write its 2-D weights' gradients */
        bind_adapters(m, l, &ba, &p, &g);
        ft_block_acts view, *a = acts_for(m, l, &view);
        /* A checkpointed block recomputes from its saved input what the backward reads
         * (dx: unwritten), all but the last of them: the set they share still holds
         * that one's forward activations (the later blocks and the head have their
         * own buffers), so it needs none. */
        bc.act_in_backward = l < m->recomputed - 1; /* block.h: the recompute's SwiGLU */
        if (l < m->recomputed - 1) {
            ft_phase_begin(be, FT_PHASE_RECOMPUTE);
            bc.rebuild_only = true;
            bc.kept = l < m->n_kept ? m->opt.checkpoint_keep : FT_CKPT_KEEP_NOTHING;
            ft_block_forward(&bc, &p, m->block_in[l], dx, a);
            bc.rebuild_only = false;
            bc.kept = FT_CKPT_KEEP_NOTHING;
            ft_phase_end(be, FT_PHASE_RECOMPUTE);
        }
        ft_phase_begin(be, FT_PHASE_BACKWARD);
        ft_block_backward(&bc, &p, &g, m->block_in[l], a, dy, dx);
        bc.act_in_backward = false;
        ft_phase_end(be, FT_PHASE_BACKWARD);
        release_adapters(m, l, true);
        if (!m->frozen)
            src->grad_done(src->ctx, u);
        src->release(src->ctx, u);
        void *t = dy;
        dy = dx;
        dx = t;
    }

    if (!m->frozen) { /* a frozen embedding takes no gradient */
        ft_phase_begin(be, FT_PHASE_BACKWARD);
        src->acquire(src->ctx, 0);
        be->ops->embedding_bwd(be, m->dt, m->gt, src->grads(src->ctx, 0), dy, m->in.ids,
                               m->in.tokens, H);
        src->grad_done(src->ctx, 0);
        src->release(src->ctx, 0);
        ft_phase_end(be, FT_PHASE_BACKWARD);
    }
    m->lora_dropout.p = 0.0;
    *loss_sum = ft_head_loss_sum(m); /* the micro-batch's one wait, after all its work */
    return 0;
}

int ft_model_eval_micro(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                        double *loss_sum, long *n_targets, ft_error *err)
{
    if (stage_batch(m, b, n_targets, err))
        return -1;
    announce_plan(m, src, 0);
    forward_blocks(m, src);
    run_head(m, src, 0.0f, 0, NULL);
    *loss_sum = ft_head_loss_sum(m);
    return 0;
}

int ft_model_logits(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                    float *logits_host, ft_error *err)
{
    long n_targets;
    if (stage_batch(m, b, &n_targets, err))
        return -1;
    announce_plan(m, src, 0);
    forward_blocks(m, src);
    const ft_model_layout *lay = &m->layout;
    const ft_model_config *c = &lay->config;
    const int hu = ft_layout_head_unit(lay);
    const int N = m->in.tokens, V = c->vocab_size;
    ft_backend *be = m->be;
    const void *hp = src->acquire(src->ctx, hu);
    const ft_head_params p =
        bind_head(m, hp, c->tie_word_embeddings ? src->acquire(src->ctx, 0) : NULL);
    ft_head_norm(m, &p, m->block_in[c->num_hidden_layers]);
    /* fp32 logits: in the fp32 chunk buffer where there is one, else in the group's
     * dlogits buffer (head_dlogits_rows) */
    float *logits = m->logits ? m->logits : m->dlogits;
    const int chunk = m->logits ? m->opt.head_chunk_rows
                                : (int)(head_dlogits_rows(m) * m->esize / sizeof(float));
    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        ft_head_logits(m, &p, logits, FT_DTYPE_F32,
                       ft_model_at(m, m->xf, (size_t)r0 * c->hidden_size), rows);
        be->ops->download(be, logits_host + (size_t)r0 * V, logits,
                          (size_t)rows * V * sizeof(float));
    }
    if (c->tie_word_embeddings)
        src->release(src->ctx, 0);
    src->release(src->ctx, hu);
    return 0;
}
