#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_rmsnorm_fwd(double *y, const double *x, const double *w, int rows, int dim, double eps)
{
    for (int r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int j = 0; j < dim; j++)
            ss += x[(size_t)r * dim + j] * x[(size_t)r * dim + j];
        double rstd = 1.0 / sqrt(ss / dim + eps);
        for (int j = 0; j < dim; j++)
            y[(size_t)r * dim + j] = x[(size_t)r * dim + j] * rstd * w[j];
    }
}

void ref_rope(double *x, const int32_t *pos, int tokens, int n_heads, int head_dim, double theta,
              int inverse)
{
    int half = head_dim / 2;
    for (int t = 0; t < tokens; t++)
        for (int h = 0; h < n_heads; h++) {
            double *x0 = x + ((size_t)t * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                double angle = pos[t] * pow(theta, -2.0 * i / head_dim);
                double c = cos(angle), s = inverse ? -sin(angle) : sin(angle);
                double a = x0[i], b = x0[i + half];
                x0[i] = a * c - b * s;
                x0[i + half] = a * s + b * c;
            }
        }
}

void ref_layernorm_fwd(double *y, double *mean, double *rstd, const double *x, const double *w,
                       const double *b, int rows, int dim, double eps)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * dim;
        double mu = 0.0, var = 0.0;
        for (int j = 0; j < dim; j++)
            mu += xr[j];
        mu /= dim;
        for (int j = 0; j < dim; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        var /= dim;
        double rs = 1.0 / sqrt(var + eps);
        if (mean)
            mean[r] = mu;
        if (rstd)
            rstd[r] = rs;
        for (int j = 0; j < dim; j++)
            y[(size_t)r * dim + j] = (xr[j] - mu) * rs * w[j] + b[j];
    }
}

void ref_rope_hf(double *x, const int32_t *pos, int tokens, int n_heads, ft_rope_shape r,
                 double theta, int inverse)
{
    const int rd = r.rot_dim, half = rd / 2;
    double *cosv = malloc((size_t)rd * sizeof(double)), *sinv = malloc((size_t)rd * sizeof(double));
    double *rot = malloc((size_t)rd * sizeof(double)), *out = malloc((size_t)rd * sizeof(double));
    for (int t = 0; t < tokens; t++) {
        for (int i = 0; i < half; i++) {
            double angle = pos[t] * pow(theta, -2.0 * i / rd);
            double c = cos(angle), s = inverse ? -sin(angle) : sin(angle);
            if (r.interleaved) { /* repeat_interleave */
                cosv[2 * i] = cosv[2 * i + 1] = c;
                sinv[2 * i] = sinv[2 * i + 1] = s;
            } else { /* cat(freqs, freqs) */
                cosv[i] = cosv[i + half] = c;
                sinv[i] = sinv[i + half] = s;
            }
        }
        for (int h = 0; h < n_heads; h++) {
            double *xh = x + ((size_t)t * n_heads + h) * r.head_dim;
            for (int d = 0; d < rd; d++) {
                if (r.interleaved) /* rotate_every_two */
                    rot[d] = d % 2 == 0 ? -xh[d + 1] : xh[d - 1];
                else /* rotate_half */
                    rot[d] = d < half ? -xh[d + half] : xh[d - half];
            }
            for (int d = 0; d < rd; d++)
                out[d] = xh[d] * cosv[d] + rot[d] * sinv[d];
            memcpy(xh, out, (size_t)rd * sizeof(double));
        }
    }
    free(cosv);
    free(sinv);
    free(rot);
    free(out);
}

/* HF's formulas, rewritten so that the far negative tail does not cancel in double:
 * 1 + erf(z) = erfc(-z), and 1 + tanh(u) = 2 / (1 + exp(-2u)). */
double ref_gelu(ft_gelu_kind kind, double x)
{
    if (kind == FT_GELU_TANH) {
        double u = sqrt(2.0 / acos(-1.0)) * (x + 0.044715 * x * x * x);
        return x / (1.0 + exp(-2.0 * u));
    }
    return 0.5 * x * erfc(-x / sqrt(2.0));
}

static int visible(const int32_t *segment, int window, int b, int T, int i, int j)
{
    if (j > i || (window > 0 && j <= i - window))
        return 0;
    return !segment || segment[(size_t)b * T + j] == segment[(size_t)b * T + i];
}

/* Probabilities of row i of (b, h) into p [T] (0 where masked); returns lse. */
static double ref_attention_row(double *p, const double *q, const double *k,
                                const int32_t *segment, ft_attn_shape s, int b, int h, int i)
{
    int T = s.seq_len, hd = s.head_dim, kvh = h / (s.n_heads / s.n_kv_heads);
    double scale = 1.0 / sqrt((double)hd);
    const double *qi = q + ((size_t)b * T + i) * s.n_heads * hd + (size_t)h * hd;
    double m = -INFINITY;
    for (int j = 0; j < T; j++) {
        p[j] = -INFINITY;
        if (!visible(segment, s.window, b, T, i, j))
            continue;
        const double *kj = k + ((size_t)b * T + j) * s.n_kv_heads * hd + (size_t)kvh * hd;
        double dot = 0.0;
        for (int d = 0; d < hd; d++)
            dot += qi[d] * kj[d];
        p[j] = dot * scale;
        m = p[j] > m ? p[j] : m;
    }
    if (m == -INFINITY) {
        for (int j = 0; j < T; j++)
            p[j] = 0.0;
        return -INFINITY;
    }
    double sum = 0.0;
    for (int j = 0; j < T; j++) {
        p[j] = p[j] == -INFINITY ? 0.0 : exp(p[j] - m);
        sum += p[j];
    }
    for (int j = 0; j < T; j++)
        p[j] /= sum;
    return m + log(sum);
}

void ref_attention_fwd(double *out, double *lse, const double *q, const double *k,
                       const double *v, const int32_t *segment, ft_attn_shape s)
{
    int T = s.seq_len, hd = s.head_dim;
    double *p = malloc((size_t)T * sizeof *p);
    for (int b = 0; b < s.batch; b++)
        for (int h = 0; h < s.n_heads; h++) {
            int kvh = h / (s.n_heads / s.n_kv_heads);
            for (int i = 0; i < T; i++) {
                double l = ref_attention_row(p, q, k, segment, s, b, h, i);
                if (lse)
                    lse[((size_t)b * s.n_heads + h) * T + i] = l;
                double *oi = out + ((size_t)b * T + i) * s.n_heads * hd + (size_t)h * hd;
                for (int d = 0; d < hd; d++)
                    oi[d] = 0.0;
                for (int j = 0; j < T; j++) {
                    if (p[j] == 0.0)
                        continue;
                    const double *vj = v + ((size_t)b * T + j) * s.n_kv_heads * hd + (size_t)kvh * hd;
                    for (int d = 0; d < hd; d++)
                        oi[d] += p[j] * vj[d];
                }
            }
        }
    free(p);
}

void ref_attention_bwd(double *dq, double *dk, double *dv, const double *dout, const double *q,
                       const double *k, const double *v, const int32_t *segment, ft_attn_shape s)
{
    int T = s.seq_len, hd = s.head_dim;
    size_t qn = (size_t)s.batch * T * s.n_heads * hd, kvn = (size_t)s.batch * T * s.n_kv_heads * hd;
    memset(dq, 0, qn * sizeof *dq);
    memset(dk, 0, kvn * sizeof *dk);
    memset(dv, 0, kvn * sizeof *dv);
    double scale = 1.0 / sqrt((double)hd);
    double *p = malloc((size_t)T * sizeof *p);
    double *dp = malloc((size_t)T * sizeof *dp);
    for (int b = 0; b < s.batch; b++)
        for (int h = 0; h < s.n_heads; h++) {
            int kvh = h / (s.n_heads / s.n_kv_heads);
            for (int i = 0; i < T; i++) {
                ref_attention_row(p, q, k, segment, s, b, h, i);
                size_t qoff = ((size_t)b * T + i) * s.n_heads * hd + (size_t)h * hd;
                const double *doi = dout + qoff;
                double D = 0.0;
                for (int j = 0; j < T; j++) {
                    dp[j] = 0.0;
                    if (p[j] == 0.0)
                        continue;
                    const double *vj = v + ((size_t)b * T + j) * s.n_kv_heads * hd + (size_t)kvh * hd;
                    for (int d = 0; d < hd; d++)
                        dp[j] += doi[d] * vj[d];
                    D += p[j] * dp[j];
                }
                for (int j = 0; j < T; j++) {
                    if (p[j] == 0.0)
                        continue;
                    double ds = p[j] * (dp[j] - D);
                    size_t koff = ((size_t)b * T + j) * s.n_kv_heads * hd + (size_t)kvh * hd;
                    for (int d = 0; d < hd; d++) {
                        dq[qoff + d] += scale * ds * k[koff + d];
                        dk[koff + d] += scale * ds * q[qoff + d];
                        dv[koff + d] += p[j] * doi[d];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

void ref_swiglu_fwd(double *out, const double *gate, const double *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = gate[i] / (1.0 + exp(-gate[i])) * up[i];
}

void ref_cross_entropy_loss(double *row_loss, const double *logits, const int32_t *targets,
                            const float *weight, int rows, int vocab)
{
    for (int r = 0; r < rows; r++) {
        double w = weight ? weight[r] : 1.0;
        if (w == 0.0) {
            row_loss[r] = 0.0;
            continue;
        }
        const double *z = logits + (size_t)r * vocab;
        double m = -INFINITY;
        for (int j = 0; j < vocab; j++)
            m = z[j] > m ? z[j] : m;
        double sum = 0.0;
        for (int j = 0; j < vocab; j++)
            sum += exp(z[j] - m);
        row_loss[r] = w * (m + log(sum) - z[targets[r]]);
    }
}
