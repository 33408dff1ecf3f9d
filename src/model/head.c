/* The head: final norm (RMSNorm, or LayerNorm with bias), output projection (with
 * GPT-J's bias) and cross-entropy, fused.
 *
 * Logits for the whole vocabulary and all tokens never exist at once: rows are
 * processed in chunks of head_chunk_rows, and each chunk's logits are turned into
 * dlogits in place by the cross-entropy op and consumed at once:
 *   dxf[rows] = dlogits W,   dW += dlogits^T xf[rows].
 * Chunks whose rows are all masked out are skipped (prompt tokens in instruction
 * data), which saves their two vocab-sized GEMMs.
 *
 * Logits and the loss are fp32 in every recipe: the forward GEMM writes fp32 from
 * model-dtype operands, and the cross-entropy runs in fp32. With bf16 the chunk's
 * dlogits are then rounded once to bf16 (m->dlogits) for the two backward GEMMs,
 * whose operands must share a type; dW accumulates in fp32 inside the GEMM. GPT-J's
 * lm_head bias is added to the fp32 logits (stored in the model's dtype, read
 * widened) and its gradient is the column sums of the fp32 dlogits.
 */
#include <stdbool.h>

#include "model/model_internal.h"

static bool chunk_has_targets(const float *weights_host, int r0, int rows)
{
    for (int r = r0; r < r0 + rows; r++)
        if (weights_host[r] != 0.0f)
            return true;
    return false;
}

void ft_head_norm(ft_model *m, const ft_head_params *p, const void *x)
{
    ft_model_norm_fwd(m, m->xf, m->mean_f, m->rstd_f, x, p->w_norm, p->b_norm, m->in.tokens);
}

void ft_head_logits(ft_model *m, const ft_head_params *p, int r0, int rows)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int H = c->hidden_size, V = c->vocab_size;
    be->ops->matmul(be, ft_model_gemm_to_f32(m), m->logits, ft_model_at(m, m->xf, (size_t)r0 * H),
                    p->w_out, rows, V, H, false, true, 1.0f, 0.0f);
    if (p->b_out)
        be->ops->bias_add(be, m->dt, FT_DTYPE_F32, m->logits, p->b_out, rows, V);
}

double ft_head_forward_backward(ft_model *m, const ft_head_params *p, ft_head_grads *g,
                                const void *x, void *dx, float grad_scale, int train)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, V = c->vocab_size;
    const int chunk = m->opt.head_chunk_rows;
    const float *weights_host = m->host_f32; /* staged by the driver, [N] */

    ft_head_norm(m, p, x);
    be->ops->zero(be, m->row_loss, (size_t)N * sizeof(float));
    if (train) /* rows of skipped chunks keep a zero gradient */
        be->ops->zero(be, m->dxf, (size_t)N * H * m->esize);

    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        if (!chunk_has_targets(weights_host, r0, rows))
            continue;
        const void *xf = ft_model_at(m, m->xf, (size_t)r0 * H);
        ft_head_logits(m, p, r0, rows);
        be->ops->cross_entropy(be, m->logits, m->row_loss + r0, m->in.targets + r0,
                               m->in.weights + r0, rows, V, grad_scale);
        if (!train)
            continue;
        if (g->b_out)
            be->ops->bias_grad(be, FT_DTYPE_F32, m->gt, g->b_out, m->logits, rows, V);
        const void *dlogits = m->logits;
        if (m->dt == FT_DTYPE_BF16) {
            be->ops->f32_to_bf16(be, m->dlogits, m->logits, (size_t)rows * V);
            dlogits = m->dlogits;
        }
        be->ops->matmul(be, ft_model_gemm(m), ft_model_at(m, m->dxf, (size_t)r0 * H), dlogits,
                        p->w_out, rows, H, V, false, false, 1.0f, 0.0f);
        be->ops->matmul(be, ft_model_gemm_to_grad(m), g->w_out, dlogits, xf, V, H, rows, true,
                        false, 1.0f, 1.0f);
    }
    if (train) {
        be->ops->zero(be, dx, (size_t)N * H * m->esize);
        ft_model_norm_bwd(m, dx, g->w_norm, g->b_norm, m->dxf, x, p->w_norm, m->mean_f, m->rstd_f,
                          N);
    }

    /* The host staging buffer is reused for the per-row losses. */
    float *loss_host = m->host_f32 + N;
    be->ops->download(be, loss_host, m->row_loss, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int r = 0; r < N; r++)
        sum += loss_host[r];
    return sum;
}
