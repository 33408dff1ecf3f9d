/* RoPE frequency tables: inv_freq per pair and cos/sin of pos * inv_freq. */
#ifndef FT_MODEL_ROPE_TABLES_H
#define FT_MODEL_ROPE_TABLES_H

#include "model/llama_config.h"

/* inv_freq[i] for i < head_dim/2, with Llama 3.1 scaling applied when configured. */
void ft_rope_inv_freq(const ft_model_config *c, float *inv_freq);

/* cos_table/sin_table [max_pos, head_dim/2] on the host. */
void ft_rope_tables(const ft_model_config *c, int max_pos, float *cos_table, float *sin_table);

#endif
