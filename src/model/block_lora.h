/* The LoRA terms of the block's projections (model/lora.h has the math), for
 * block.c only. proj is the projection's ft_block_tensor (FT_BLK_Q .. FT_BLK_DOWN);
 * each function is a no-op where no adapter feeds it. gpt_neox's fused site feeds
 * q, k and v from one u: the forward computes u at q, the backward sums du over q,
 * k and v and finishes the site at v. */
#ifndef FT_MODEL_BLOCK_LORA_H
#define FT_MODEL_BLOCK_LORA_H

#include "model/block.h"

/* z[N, out] += s (a A^T) B^T, keeping u = a A^T in acts. */
void ft_block_lora_fwd(const ft_block_ctx *bc, const ft_block_params *p, ft_block_acts *acts,
                       int proj, void *z, const void *a);

/* The forward's u = a A^T alone (no term added to z): what a recompute that skips the
 * projection itself keeps for the backward. */
void ft_block_lora_keep_u(const ft_block_ctx *bc, const ft_block_params *p, ft_block_acts *acts,
                          int proj, const void *a);

/* Backward, first half (before the base projection's da overwrites anything, since
 * the MLP's down projection writes da over its input a):
 *   dB += s dz^T u,  du (+)= s dz B,  and once the site's du is complete dA += du^T a. */
void ft_block_lora_bwd_weights(const ft_block_ctx *bc, const ft_block_params *p,
                               ft_block_grads *g, ft_block_acts *acts, int proj, const void *dz,
                               const void *a);
/* Second half, after the base's da: da += du A once the site's du is complete. */
void ft_block_lora_bwd_input(const ft_block_ctx *bc, const ft_block_params *p, int proj, void *da);

#endif
