/* RoPE frequency tables: inv_freq per pair and cos/sin of pos * inv_freq. */
#ifndef FT_MODEL_ROPE_TABLES_H
#define FT_MODEL_ROPE_TABLES_H

#include "backend/backend.h"
#include "model/model_config.h"

/* inv_freq[i] for i < rot_dim/2 (ft_model_rot_dim), with Llama 3.1 scaling applied when configured. */
void ft_rope_inv_freq(const ft_model_config *c, float *inv_freq);

/* cos_table/sin_table [max_pos, rot_dim/2] on the host. */
void ft_rope_tables(const ft_model_config *c, int max_pos, float *cos_table, float *sin_table);

/* The rotation geometry of the backend's rope op for this config. */
static inline ft_rope_shape ft_model_rope_shape(const ft_model_config *c)
{
    return (ft_rope_shape){ .head_dim = c->head_dim, .rot_dim = ft_model_rot_dim(c),
                            .interleaved = ft_model_family_of(c)->rope_interleaved };
}

#endif
