/* Shape of a model of one of ftmpi's families (Llama, Qwen2, Qwen3, Mistral,
 * GPT-NeoX, GPT-J: model/family.h): the fields of HF config.json that ftmpi uses. */
#ifndef FT_MODEL_MODEL_CONFIG_H
#define FT_MODEL_MODEL_CONFIG_H

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
    int intermediate_size;       /* MLP hidden width (SwiGLU, or GELU: n_inner) */
    int num_hidden_layers;
    int num_attention_heads;
    int num_key_value_heads;     /* < num_attention_heads: grouped-query attention */
    int head_dim;                /* usually hidden_size / num_attention_heads */
    int max_position_embeddings;
    double rms_norm_eps;         /* epsilon of every norm: RMSNorm's, or LayerNorm's
                                  * (layer_norm_eps / layer_norm_epsilon) */
    double rope_theta;
    /* GPT-style switches (model/family.h says which family reads which; all zero
     * is the Llama shape) */
    int rotary_dim;              /* leading dims of a head that RoPE rotates; 0: all */
    bool parallel_residual;      /* gpt_neox: y = x + attn(ln1 x) + mlp(ln2 x) */
    bool attention_bias;         /* gpt_neox: q/k/v/o projections have biases */
    bool gelu_tanh;              /* GELU families: tanh approximation (gelu_new), else erf */
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

/* What the block computes, from the family and the config's switches. */
static inline int ft_model_rot_dim(const ft_model_config *c)
{
    return c->rotary_dim > 0 ? c->rotary_dim : c->head_dim;
}
static inline bool ft_model_has_qkv_bias(const ft_model_config *c)
{
    const ft_family_info *f = ft_model_family_of(c);
    return f->qkv_bias || (f->attention_bias_key && c->attention_bias);
}
static inline bool ft_model_has_o_bias(const ft_model_config *c)
{
    return ft_model_family_of(c)->attention_bias_key && c->attention_bias;
}
/* Attention and MLP both read the block input (x + attn(n1 x) + mlp(n2 x)). */
static inline bool ft_model_parallel_residual(const ft_model_config *c)
{
    return ft_model_family_of(c)->shared_norm || c->parallel_residual;
}

/* Parameter count (embedding, blocks, final norm, untied head). */
long long ft_model_config_param_count(const ft_model_config *c);

#endif
