/* Double-precision reference implementations of the backend's ops, written the
 * plain way (no tiling, no online softmax), for the tests: forward values to
 * compare with, and objectives for finite differences. */
#ifndef FT_TEST_BACKEND_REF_OPS_H
#define FT_TEST_BACKEND_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

void ref_rmsnorm_fwd(double *y, const double *x, const double *w, int rows, int dim, double eps);

/* In place on x [tokens, n_heads*head_dim], half-split layout, angle
 * pos[t] * theta^(-2i/head_dim); cos/sin evaluated in double. */
void ref_rope(double *x, const int32_t *pos, int tokens, int n_heads, int head_dim, double theta,
              int inverse);

/* torch.nn.LayerNorm per row: y = (x - mean) / sqrt(var + eps) * w + b, var biased.
 * mean and rstd may be NULL. */
void ref_layernorm_fwd(double *y, double *mean, double *rstd, const double *x, const double *w,
                       const double *b, int rows, int dim, double eps);

/* Hugging Face's rotary embeddings written their way, on the first r.rot_dim dims of
 * each head of x [tokens, n_heads*r.head_dim] (the rest pass through):
 * x_rot * cos + rotate(x_rot) * sin with per-dimension cos/sin vectors of length
 * rot_dim, angle_i = pos * theta^(-2i/rot_dim), i < rot_dim/2;
 *   half-split (Llama/NeoX): rotate_half(x) = cat(-x2, x1), cos = cat(c, c);
 *   interleaved (GPT-J):     rotate_every_two(x) = (-x1, x0, -x3, x2, ...),
 *                            cos = repeat_interleave(c, 2).
 * inverse: by -angle. */
void ref_rope_hf(double *x, const int32_t *pos, int tokens, int n_heads, ft_rope_shape r,
                 double theta, int inverse);

/* gelu(x) of ft_gelu_kind in double, accurate to double rounding everywhere (the
 * tails included). */
double ref_gelu(ft_gelu_kind kind, double x);

/* Naive attention: materialises each row of scores, masks (causal + segments +
 * the sliding window s.window: j <= i - window is masked),
 * softmax in double. lse may be NULL. A row that sees nothing gets out = 0 and
 * lse = -inf. */
void ref_attention_fwd(double *out, double *lse, const double *q, const double *k,
                       const double *v, const int32_t *segment, ft_attn_shape s);
/* Naive backward from the same definition (overwrites dq, dk, dv):
 * dP_ij = dO_i.v_j, dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'),
 * dQ_i = scale sum_j dS_ij k_j, dK_j = scale sum_i dS_ij q_i, dV_j = sum_i P_ij dO_i. */
void ref_attention_bwd(double *dq, double *dk, double *dv, const double *dout, const double *q,
                       const double *k, const double *v, const int32_t *segment, ft_attn_shape s);

void ref_swiglu_fwd(double *out, const double *gate, const double *up, size_t n);

/* row_loss[r] = w_r (logsumexp(z_r) - z_r[t_r]); weight NULL = 1. */
void ref_cross_entropy_loss(double *row_loss, const double *logits, const int32_t *targets,
                            const float *weight, int rows, int vocab);

#endif
