/* Shape of a Llama-like model (Llama, Qwen2, Qwen3, Mistral: model/family.h): the
 * fields of HF config.json that ftmpi uses. */
#ifndef FT_MODEL_LLAMA_CONFIG_H
#define FT_MODEL_LLAMA_CONFIG_H

#include <stdbool.h>

#include "model/family.h"
#include "util/error.h"

typedef enum ft_rope_scaling_type {
    FT_ROPE_SCALING_NONE = 0,
    FT_ROPE_SCALING_LLAMA3 = 1, /* Llama 3.1 frequency-dependent scaling */
} ft_rope_scaling_type;

typedef struct ft_rope_scaling {
    ft_rope_scaling_type type;
    double factor;
    double low_freq_factor;
    double high_freq_factor;
    int original_max_position_embeddings;
} ft_rope_scaling;

typedef struct ft_model_config {
    ft_model_family family;      /* the architecture; 0 (llama) when zero-initialised */
    int sliding_window;          /* mistral: attention sees the last W positions; 0: none */
    int vocab_size;
    int hidden_size;             /* model width (dim) */
    int intermediate_size;       /* SwiGLU hidden width */
    int num_hidden_layers;
    int num_attention_heads;
    int num_key_value_heads;     /* < num_attention_heads: grouped-query attention */
    int head_dim;                /* usually hidden_size / num_attention_heads */
    int max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    ft_rope_scaling rope_scaling;
    bool tie_word_embeddings;
    int bos_token_id;            /* -1 when unknown */
    int eos_token_id;
} ft_model_config;

/* Checks that the shape is one the model can run: positive sizes, heads dividing
 * evenly, even head_dim for RoPE, sane rope scaling. The message names the field. */
/* Upper bound of num_hidden_layers (see ft_model_config_validate). */
#define FT_MAX_HIDDEN_LAYERS 65536

int ft_model_config_validate(const ft_model_config *c, ft_error *err);

/* The family's switches (q/k/v biases, q/k norm) for this config. */
static inline const ft_family_info *ft_model_family_of(const ft_model_config *c)
{
    return ft_family_info_of(c->family);
}

/* Parameter count (embedding, blocks, final norm, untied head). */
long long ft_model_config_param_count(const ft_model_config *c);

#endif
