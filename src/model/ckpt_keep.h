/* What a block that recomputes its forward in the backward (activation checkpointing)
 * keeps of that forward besides its input: a trade of memory for recompute, chosen by
 * the run (ft_model_options.checkpoint_keep) and read by the block's recompute
 * (ft_block_ctx.kept). Per block of N tokens, Q = heads x head_dim, KV likewise: */
#ifndef FT_MODEL_CKPT_KEEP_H
#define FT_MODEL_CKPT_KEEP_H

typedef enum ft_ckpt_keep {
    /* nothing: the recompute repeats everything the backward reads */
    FT_CKPT_KEEP_NOTHING = 0,
    /* attention's output and log-sum-exp (N Q values and N heads floats): the recompute
     * repeats the q, k, v and output projections but not attention itself, whose
     * backward reads the kept output as the forward left it */
    FT_CKPT_KEEP_ATTENTION_OUTPUT,
    /* the whole attention half (q, k, v, the output and log-sum-exp, the residual after
     * it: about N (2 Q + 2 KV + H) values): the recompute is the norms and the MLP's
     * gate and up projections */
    FT_CKPT_KEEP_ATTENTION,
} ft_ckpt_keep;

#endif
