/* The head: final norm (RMSNorm, or LayerNorm with bias), output projection (with
 * GPT-J's bias) and cross-entropy, fused, with one pass over the output weight.
 *
 * Only rows with a target take part (loss weight != 0; prompt tokens in instruction
 * data have none): their final-norm outputs are gathered into consecutive rows
 * (xpack), and their input gradients scattered back at the end. Every other row's
 * loss and gradient is zero.
 *
 * The live rows are cut into groups of head_group_rows (all of them when their
 * dlogits fit the memory budget, model.c resolve_options). For a group g:
 *   logits   = X_g W^T (+ b)          in chunks of head_chunk_rows (a group, but GPT-J's)
 *   dlogits  = d CE / d logits         in place (the cross-entropy op)
 *   dX_g     = dlogits W               one GEMM for the group
 *   dW      += dlogits^T X_g           one GEMM for the group
 * so the vocab x hidden weight gradient is read and written once per group, once
 * per micro-batch when the budget holds the whole micro-batch; chunking by rows the
 * old way cost one read-modify-write of dW (1 GiB in fp32 at vocab 128k, hidden 2k)
 * per 65-row chunk, which dominated a GPU step.
 *
 * The logits are stored as the activations, the loss is fp32. The group's logits
 * buffer is its dlogits buffer, one chunk a group: in bf16, as PyTorch's autocast and
 * Megatron do, the logits GEMM rounds its fp32 sums once to bf16 straight into the
 * group's buffer, and the cross-entropy widens them and writes the dlogits over them,
 * rounded once, the operand of the two backward GEMMs (whose operands share a type; dW
 * accumulates in fp32 inside the GEMM). At the 1B shape that is 1 GiB of logits
 * written and read twice where fp32 logits in chunks of 256 rows cost 2 GiB written,
 * 4 GiB read and the 525 MB weight read once per chunk (a 256-row GEMM does 256 FLOPs
 * per byte of it, below the H100's balance of ~300: memory-bound). GPT-J's lm_head
 * bias is added to fp32 logits in a chunk buffer of their own and its gradient is the
 * column sums of the fp32 dlogits: there (bf16 only) the chunk's fp32 dlogits are made
 * in place and then rounded into the group's buffer.
 */
#include <stdbool.h>

#include "model/head_logits.h"
#include "model/model_internal.h"

void ft_head_norm(ft_model *m, const ft_head_params *p, const void *x)
{
    ft_model_norm_fwd(m, m->xf, m->mean_f, m->rstd_f, x, p->w_norm, p->b_norm, m->in.tokens);
}

void ft_head_logits(ft_model *m, const ft_head_params *p, void *logits, ft_dtype lt, const void *x,
                    int rows)
{
    ft_head_project(m->be, &m->layout.config, m->dt, logits, lt, x, p->w_out, p->b_out, rows);
}

/* The rows of this micro-batch that have a target, as device index lists:
 * live[i] = the i-th such row; inv[r] = its position in live, or n (a zero row of
 * dxpack) for a row without target; their targets and weights packed alike.
 * Returns the number of live rows (none uploaded when all or none are live). */
static int pack_rows(ft_model *m)
{
    ft_backend *be = m->be;
    const int N = m->in.tokens;
    const float *w_host = m->host_f32;                 /* staged by the driver */
    const int32_t *tgt_host = m->host_i32 + N;         /* likewise (stage_batch) */
    int32_t *live = m->host_pack, *inv = live + N, *tgt = inv + N;
    float *w = (float *)(tgt + N);
    int n = 0;
    for (int r = 0; r < N; r++)
        if (w_host[r] != 0.0f) {
            live[n] = r;
            tgt[n] = tgt_host[r];
            w[n] = w_host[r];
            n++;
        }
    if (n == N || n == 0)
        return n;
    for (int r = 0, i = 0; r < N; r++)
        inv[r] = i < n && live[i] == r ? i++ : n;
    be->ops->upload(be, m->pack.live, live, (size_t)n * sizeof(int32_t));
    be->ops->upload(be, m->pack.inv, inv, (size_t)N * sizeof(int32_t));
    be->ops->upload(be, m->pack.targets, tgt, (size_t)n * sizeof(int32_t));
    be->ops->upload(be, m->pack.weights, w, (size_t)n * sizeof(float));
    return n;
}

void ft_head_pack_live_rows(ft_model *m)
{
    m->pack.n = pack_rows(m);
}

void ft_head_forward_backward(ft_model *m, const ft_head_params *p, ft_head_grads *g,
                              const void *x, void *dx, float grad_scale, int train)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, V = c->vocab_size;
    const int group = m->opt.head_group_rows, chunk = m->opt.head_chunk_rows;
    const bool in_place = !m->logits; /* dlogits overwrite the logits (model_internal.h) */

    ft_head_norm(m, p, x);
    const int n = m->pack.n;
    const bool packed = n > 0 && n < N;
    /* Inputs of the packed rows: all rows, or the gathered live ones. */
    const void *xs = m->xf;
    void *dxs = m->dxf;
    const int32_t *targets = m->in.targets;
    const float *weights = m->in.weights;
    if (packed) {
        be->ops->embedding_fwd(be, m->dt, m->pack.x, m->xf, m->pack.live, n, H);
        xs = m->pack.x;
        dxs = m->pack.dx;
        targets = m->pack.targets;
        weights = m->pack.weights;
    }
    for (int g0 = 0; g0 < n; g0 += group) {
        const int grows = n - g0 < group ? n - g0 : group;
        for (int r0 = g0; r0 < g0 + grows; r0 += chunk) {
            const int rows = g0 + grows - r0 < chunk ? g0 + grows - r0 : chunk;
            void *group_rows = ft_model_at(m, m->dlogits, (size_t)(r0 - g0) * V);
            void *logits = in_place ? group_rows : m->logits;
            const ft_dtype lt = in_place ? m->dt : FT_DTYPE_F32;
            /* the fp32 dlogits are wanted for themselves only by a bias's gradient */
            const bool fp32_first = !in_place && train && g->b_out;
            ft_head_logits(m, p, logits, lt, ft_model_at(m, xs, (size_t)r0 * H), rows);
            be->ops->cross_entropy(be, logits, lt, fp32_first ? logits : group_rows,
                                   fp32_first ? FT_DTYPE_F32 : m->dt, m->row_loss + r0,
                                   targets + r0, weights + r0, rows, V, grad_scale);
            if (!train)
                continue;
            if (g->b_out)
                be->ops->bias_grad(be, lt, m->gt, g->b_out, logits, rows, V);
            if (fp32_first)
                be->ops->f32_to_bf16(be, group_rows, logits, (size_t)rows * V);
        }
        if (!train)
            continue;
        const void *xg = ft_model_at(m, xs, (size_t)g0 * H);
        be->ops->matmul(be, ft_model_gemm(m), ft_model_at(m, dxs, (size_t)g0 * H), m->dlogits,
                        p->w_out, grows, H, V, false, false, 1.0f, 0.0f);
        if (g->w_out) /* a frozen head (LoRA) has no weight gradient; the first group
                         writes an unset one */
            be->ops->matmul(be, ft_model_gemm_to_grad(m), g->w_out, m->dlogits, xg, V, H, grows,
                            true, false, 1.0f, g->w_out_first && g0 == 0 ? 0.0f : 1.0f);
    }
    if (train && g->w_out && g->w_out_first && n == 0) /* no row wrote it */
        be->ops->zero(be, g->w_out, (size_t)V * H * m->gsize);
    if (train) {
        if (packed) { /* rows without a target get dxpack's zero row n */
            be->ops->zero(be, ft_model_at(m, m->pack.dx, (size_t)n * H), (size_t)H * m->esize);
            be->ops->embedding_fwd(be, m->dt, m->dxf, m->pack.dx, m->pack.inv, N, H);
        } else if (n == 0) {
            be->ops->zero(be, m->dxf, (size_t)N * H * m->esize);
        }
        ft_model_norm_bwd(m, dx, NULL, g->w_norm, g->b_norm, m->dxf, x, p->w_norm, m->mean_f,
                          m->rstd_f, N);
    }
}

double ft_head_loss_sum(ft_model *m)
{
    /* The host staging buffer is reused for the per-row losses (packed rows first:
     * the zeros of rows without target do not change a sum). */
    const int n = m->pack.n;
    if (n == 0) { /* nothing to read back; still wait, as the callers' one wait */
        m->be->ops->sync(m->be);
        return 0.0;
    }
    float *loss_host = m->host_f32 + m->in.tokens;
    m->be->ops->download(m->be, loss_host, m->row_loss, (size_t)n * sizeof(float));
    double sum = 0.0;
    for (int r = 0; r < n; r++)
        sum += loss_host[r];
    return sum;
}
