/* The LM head's output projection on a narrow context: logits of rows of the final
 * norm's output. The trainer's head (head.c, chunk by chunk) and the KV-cache decoder
 * (the last token, fp32) both compute their logits here. */
#ifndef FT_MODEL_HEAD_LOGITS_H
#define FT_MODEL_HEAD_LOGITS_H

#include "backend/backend.h"
#include "model/model_config.h"

/* logits [rows, vocab] stored as lt (fp32, or dt: rounded once from the fp32
 * accumulation) = x W^T (+ b): x [rows, hidden] and W [vocab, hidden] (lm_head, or the
 * embedding when tied) stored as dt; GPT-J's bias b (dt, NULL when absent) added to the
 * logits. */
static inline void ft_head_project(ft_backend *be, const ft_model_config *c, ft_dtype dt,
                                   void *logits, ft_dtype lt, const void *x, const void *w_out,
                                   const void *b_out, int rows)
{
    const int H = c->hidden_size, V = c->vocab_size;
    be->ops->matmul(be, (ft_gemm_types){ dt, dt, lt }, logits, x, w_out, rows, V, H, false, true,
                    1.0f, 0.0f);
    if (b_out)
        be->ops->bias_add(be, dt, lt, logits, b_out, rows, V);
}

#endif
