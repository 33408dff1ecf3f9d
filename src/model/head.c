/* The head: final RMSNorm, output projection and cross-entropy, fused.
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
 * whose operands must share a type; dW accumulates in fp32 inside the GEMM.
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

double ft_head_forward_backward(ft_model *m, const void *w_out, const void *w_norm,
                                void *g_out, void *g_norm, const void *x, void *dx,
                                float grad_scale, int train)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, V = c->vocab_size;
    const int chunk = m->opt.head_chunk_rows;
    const float *weights_host = m->host_f32; /* staged by the driver, [N] */

    be->ops->rmsnorm_fwd(be, m->dt, m->xf, m->rstd_f, x, w_norm, N, H, (float)c->rms_norm_eps);
    be->ops->zero(be, m->row_loss, (size_t)N * sizeof(float));
    if (train) /* rows of skipped chunks keep a zero gradient */
        be->ops->zero(be, m->dxf, (size_t)N * H * m->esize);

    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        if (!chunk_has_targets(weights_host, r0, rows))
            continue;
        const void *xf = ft_model_at(m, m->xf, (size_t)r0 * H);
        be->ops->matmul(be, ft_model_gemm_to_f32(m), m->logits, xf, w_out, rows, V, H, false, true,
                        1.0f, 0.0f);
        be->ops->cross_entropy(be, m->logits, m->row_loss + r0, m->in.targets + r0,
                               m->in.weights + r0, rows, V, grad_scale);
        if (!train)
            continue;
        const void *dlogits = m->logits;
        if (m->dt == FT_DTYPE_BF16) {
            be->ops->f32_to_bf16(be, m->dlogits, m->logits, (size_t)rows * V);
            dlogits = m->dlogits;
        }
        be->ops->matmul(be, ft_model_gemm(m), ft_model_at(m, m->dxf, (size_t)r0 * H), dlogits,
                        w_out, rows, H, V, false, false, 1.0f, 0.0f);
        be->ops->matmul(be, ft_model_gemm_to_grad(m), g_out, dlogits, xf, V, H, rows, true, false,
                        1.0f, 1.0f);
    }
    if (train) {
        be->ops->zero(be, dx, (size_t)N * H * m->esize);
        be->ops->rmsnorm_bwd(be, m->dt, m->gt, dx, g_norm, m->dxf, x, w_norm, m->rstd_f, N, H);
    }

    /* The host staging buffer is reused for the per-row losses. */
    float *loss_host = m->host_f32 + N;
    be->ops->download(be, loss_host, m->row_loss, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int r = 0; r < N; r++)
        sum += loss_host[r];
    return sum;
}
