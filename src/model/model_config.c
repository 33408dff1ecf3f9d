/* Checks and sizes of a Llama model shape (model/model_config.h).
 *
 * Messages from ft_model_config_validate start with the field name as written in
 * ft_model_config ("num_key_value_heads: ...", "rope_scaling.factor: ..."): the
 * config reader maps that name to the key and its file:line, and other callers
 * prepend where the shape came from (e.g. the weights file).
 */
#include "model/model_config.h"

#include <limits.h>
#include <math.h>

int ft_model_config_validate(const ft_model_config *c, ft_error *err)
{
#define FT_POSITIVE(field)                                                                  \
    do {                                                                                    \
        if (c->field <= 0)                                                                  \
            return ft_fail(err, #field ": %d must be > 0", c->field);                       \
    } while (0)
    FT_POSITIVE(vocab_size);
    FT_POSITIVE(hidden_size);
    FT_POSITIVE(intermediate_size);
    FT_POSITIVE(num_hidden_layers);
    FT_POSITIVE(num_attention_heads);
    FT_POSITIVE(num_key_value_heads);
    FT_POSITIVE(head_dim);
    FT_POSITIVE(max_position_embeddings);
#undef FT_POSITIVE
    /* a bound far above any real model (Llama 3.1 405B has 126) that keeps every count
     * derived from it (units, tensors, layer indices) inside an int */
    if (c->num_hidden_layers > FT_MAX_HIDDEN_LAYERS)
        return ft_fail(err, "num_hidden_layers: %d exceeds the limit of %d", c->num_hidden_layers,
                       FT_MAX_HIDDEN_LAYERS);

    const ft_family_info *fam = ft_model_family_of(c);
    if (!fam)
        return ft_fail(err, "family: unknown model family %d (ftmpi has %s)", (int)c->family,
                       ft_family_names());
    if (c->sliding_window < 0)
        return ft_fail(err, "sliding_window: %d must be >= 0 (0: no window)", c->sliding_window);
    if (c->sliding_window > 0 && !fam->sliding_window)
        return ft_fail(err, "sliding_window: %d is set but %s models have no sliding window "
                       "(only mistral has one here)", c->sliding_window, fam->name);

    if (c->rotary_dim < 0 || c->rotary_dim > c->head_dim || c->rotary_dim % 2 != 0)
        return ft_fail(err, "rotary_dim: %d must be even and in [0, head_dim %d] (0: the whole "
                       "head)", c->rotary_dim, c->head_dim);
    const bool gpt = fam->layernorm;
    if (!gpt && c->rotary_dim != 0 && c->rotary_dim != c->head_dim)
        return ft_fail(err, "rotary_dim: %d is partial but %s models rotate the whole head "
                       "(only gpt_neox and gptj have partial rotary)", c->rotary_dim, fam->name);
    if (c->parallel_residual && !fam->parallel_residual_key && !fam->shared_norm)
        return ft_fail(err, "parallel_residual: is set but %s models have a sequential "
                       "residual (only gpt_neox has the switch; gptj is always parallel)",
                       fam->name);
    if (c->attention_bias && !fam->attention_bias_key)
        return ft_fail(err, "attention_bias: is set but %s models have no such switch (only "
                       "gpt_neox; qwen2's q/k/v biases come with the family)", fam->name);
    if (c->gelu_tanh && !fam->gelu_mlp)
        return ft_fail(err, "gelu_tanh: is set but %s models have a SwiGLU MLP, no GELU "
                       "(only gpt_neox and gptj)", fam->name);
    if (gpt && c->num_key_value_heads != c->num_attention_heads)
        return ft_fail(err, "num_key_value_heads: %d differs from num_attention_heads (%d); %s "
                       "models have no grouped-query attention", c->num_key_value_heads,
                       c->num_attention_heads, fam->name);
    if (gpt && c->rope_scaling.type != FT_ROPE_SCALING_NONE)
        return ft_fail(err, "rope_scaling.type: %s models have no RoPE scaling here", fam->name);

    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return ft_fail(err, "num_key_value_heads: %d does not divide num_attention_heads (%d)",
                       c->num_key_value_heads, c->num_attention_heads);
    if (c->head_dim % 2 != 0)
        return ft_fail(err, "head_dim: %d must be even (RoPE rotates pairs of dimensions)",
                       c->head_dim);
    /* the kernels index q/k/v rows with int */
    if ((long long)c->num_attention_heads * c->head_dim > INT_MAX)
        return ft_fail(err, "head_dim: num_attention_heads x head_dim = %lld is too large",
                       (long long)c->num_attention_heads * c->head_dim);
    /* written as !(x > 0) so that NaN fails too */
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps))
        return ft_fail(err, "rms_norm_eps: %g must be a finite number > 0", c->rms_norm_eps);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return ft_fail(err, "rope_theta: %g must be a finite number > 0", c->rope_theta);
    if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
        return ft_fail(err, "bos_token_id: %d is not a token id (vocab_size %d; -1 for none)",
                       c->bos_token_id, c->vocab_size);
    if (c->eos_token_id < -1 || c->eos_token_id >= c->vocab_size)
        return ft_fail(err, "eos_token_id: %d is not a token id (vocab_size %d; -1 for none)",
                       c->eos_token_id, c->vocab_size);

    const ft_rope_scaling *r = &c->rope_scaling;
    switch (r->type) {
    case FT_ROPE_SCALING_NONE:
        break;
    case FT_ROPE_SCALING_LLAMA3:
        if (!(r->factor >= 1) || !isfinite(r->factor))
            return ft_fail(err, "rope_scaling.factor: %g must be a finite number >= 1", r->factor);
        if (!(r->low_freq_factor > 0) || !isfinite(r->low_freq_factor))
            return ft_fail(err, "rope_scaling.low_freq_factor: %g must be a finite number > 0",
                           r->low_freq_factor);
        /* the smoothing divides by high - low */
        if (!(r->high_freq_factor > r->low_freq_factor) || !isfinite(r->high_freq_factor))
            return ft_fail(err, "rope_scaling.high_freq_factor: %g must be greater than low_freq_factor (%g)",
                           r->high_freq_factor, r->low_freq_factor);
        if (r->original_max_position_embeddings <= 0)
            return ft_fail(err, "rope_scaling.original_max_position_embeddings: %d must be > 0",
                           r->original_max_position_embeddings);
        break;
    default:
        return ft_fail(err, "rope_scaling.type: unknown scaling type %d", (int)r->type);
    }
    return 0;
}

long long ft_model_config_param_count(const ft_model_config *c)
{
    long long V = c->vocab_size, H = c->hidden_size, I = c->intermediate_size;
    long long L = c->num_hidden_layers, nh = c->num_attention_heads;
    long long nkv = c->num_key_value_heads, hd = c->head_dim;
    const ft_family_info *fam = ft_model_family_of(c);
    if (!fam)
        return 0;
    const long long norm = fam->layernorm ? 2 * H : H; /* weight (and bias) */
    long long per_layer = H * nh * hd       /* q_proj */
                          + 2 * H * nkv * hd /* k_proj, v_proj */
                          + nh * hd * H      /* o_proj */
                          + (fam->gelu_mlp ? 2 : 3) * H * I /* (gate,) up, down */
                          + (fam->shared_norm ? 1 : 2) * norm; /* the block's norms */
    if (ft_model_has_qkv_bias(c))
        per_layer += nh * hd + 2 * nkv * hd;     /* q, k, v biases */
    if (ft_model_has_o_bias(c))
        per_layer += H;
    if (fam->gelu_mlp)
        per_layer += I + H;                      /* up and down biases */
    if (fam->qk_norm)
        per_layer += 2 * hd;                     /* q_norm, k_norm (one head wide) */
    return V * H                             /* embedding */
           + L * per_layer + norm            /* final norm */
           + (c->tie_word_embeddings ? 0 : V * H) /* lm_head */
           + (fam->lm_head_bias ? V : 0);
}
