/* The head: final RMSNorm, output projection and cross-entropy, fused.
 *
 * Logits for the whole vocabulary and all tokens never exist at once: rows are
 * processed in chunks of head_chunk_rows, and each chunk's logits are turned into
 * dlogits in place by the cross-entropy op and consumed at once:
 *   dxf[rows] = dlogits W,   dW += dlogits^T xf[rows].
 * Chunks whose rows are all masked out are skipped (prompt tokens in instruction
 * data), which saves their two vocab-sized GEMMs.
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

double ft_head_forward_backward(ft_model *m, const float *w_out, const float *w_norm,
                                float *g_out, float *g_norm, const float *x, float *dx,
                                float grad_scale, int train)
{
    ft_backend *be = m->be;
    const ft_model_config *c = &m->layout.config;
    const int N = m->in.tokens, H = c->hidden_size, V = c->vocab_size;
    const int chunk = m->opt.head_chunk_rows;
    const float *weights_host = m->host_f32; /* staged by the driver, [N] */

    be->ops->rmsnorm_fwd(be, FT_DTYPE_F32, m->xf, m->rstd_f, x, w_norm, N, H, (float)c->rms_norm_eps);
    be->ops->zero(be, m->row_loss, (size_t)N * sizeof(float));
    if (train)
        be->ops->zero(be, m->dxf, (size_t)N * H * sizeof(float));

    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        if (!chunk_has_targets(weights_host, r0, rows))
            continue;
        const float *xf = m->xf + (size_t)r0 * H;
        be->ops->matmul(be, FT_GEMM_F32, m->logits, xf, w_out, rows, V, H, false, true, 1.0f, 0.0f);
        be->ops->cross_entropy(be, m->logits, m->row_loss + r0, m->in.targets + r0,
                               m->in.weights + r0, rows, V, grad_scale);
        if (!train)
            continue;
        be->ops->matmul(be, FT_GEMM_F32, m->dxf + (size_t)r0 * H, m->logits, w_out, rows, H, V, false, false,
                        1.0f, 0.0f);
        be->ops->matmul(be, FT_GEMM_F32, g_out, m->logits, xf, V, H, rows, true, false, 1.0f, 1.0f);
    }
    if (train) {
        be->ops->zero(be, dx, (size_t)N * H * sizeof(float));
        be->ops->rmsnorm_bwd(be, FT_DTYPE_F32, dx, g_norm, m->dxf, x, w_norm, m->rstd_f, N, H);
    }

    /* The host staging buffer is reused for the per-row losses. */
    float *loss_host = m->host_f32 + N;
    be->ops->download(be, loss_host, m->row_loss, (size_t)N * sizeof(float));
    double sum = 0.0;
    for (int r = 0; r < N; r++)
        sum += loss_host[r];
    return sum;
}
