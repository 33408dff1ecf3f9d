/* The per-family rules of config.json (io/hf_config_internal.h): one
 * hf_family_adapter row per family, with the readers of what the family adds to or
 * forbids in the Llama fields, the GPT families' GELU and rotary readers, the
 * derived values each writes, its defaults and the constant keys its config class
 * writes. */
#include "io/hf_config_internal.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* A boolean field that must be false when present (features ftmpi lacks). */
static int require_false(const char *path, const json_t *root, const char *key,
                         const char *why, ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    if (j && !json_is_null(j) && !json_is_false(j))
        return ft_fail(err, "%s: \"%s\" is %s; %s (needs false)", path, key,
                       json_is_true(j) ? "true" : "not a boolean", why);
    return 0;
}

/* transformers 5's layer_types, when present, must list only "full_attention". */
static int require_full_attention(const char *path, const json_t *root, ft_error *err)
{
    const json_t *types = json_object_get(root, "layer_types");
    size_t i;
    json_t *t;
    if (!types || json_is_null(types))
        return 0;
    if (!json_is_array(types))
        return ft_fail(err, "%s: \"layer_types\" must be a list", path);
    json_array_foreach(types, i, t) {
        if (!json_is_string(t) || strcmp(json_string_value(t), "full_attention") != 0)
            return ft_fail(err, "%s: layer_types[%zu] is not \"full_attention\"; ftmpi trains "
                           "this family with full attention in every layer", path, i);
    }
    return 0;
}

/* What each family with Llama's key names adds to or removes from the Llama fields
 * (the rows of `adapters` below name these readers). */
static const char no_window[] = "ftmpi trains this family with full attention; its "
                                "sliding-window layers are not supported";

/* llama: attention_bias and mlp_bias must be false (ftmpi's Llama has none) */
static int read_llama_quirks(const char *path, const json_t *root, ft_model_config *c,
                             ft_hf_config_info *info, ft_error *err)
{
    (void)c, (void)info;
    return require_false(path, root, "attention_bias", "ftmpi's Llama has no biases", err) ||
           require_false(path, root, "mlp_bias", "ftmpi's Llama has no biases", err);
}

/* qwen2: always has q/k/v biases (no switch); use_sliding_window must be false */
static int read_qwen2_quirks(const char *path, const json_t *root, ft_model_config *c,
                             ft_hf_config_info *info, ft_error *err)
{
    (void)c, (void)info;
    return require_false(path, root, "use_sliding_window", no_window, err) ||
           require_full_attention(path, root, err);
}

/* qwen3: attention_bias (q/k/v/o biases) and use_sliding_window must be false */
static int read_qwen3_quirks(const char *path, const json_t *root, ft_model_config *c,
                             ft_hf_config_info *info, ft_error *err)
{
    (void)c, (void)info;
    return require_false(path, root, "attention_bias", "ftmpi's Qwen3 has no q/k/v/o biases",
                         err) ||
           require_false(path, root, "use_sliding_window", no_window, err) ||
           require_full_attention(path, root, err);
}

/* mistral: sliding_window: a size, null (none) or absent (MistralConfig's 4096) */
static int read_mistral_quirks(const char *path, const json_t *root, ft_model_config *c,
                               ft_hf_config_info *info, ft_error *err)
{
    const json_t *w = json_object_get(root, "sliding_window");
    if (!w) {
        ft_hf_add_note(info, "sliding_window absent: using 4096 (the Mistral default)");
        c->sliding_window = 4096;
        return 0;
    }
    return ft_hf_get_int(path, root, "sliding_window", false, 0, 1, &c->sliding_window, err);
}

/* The GELU of hidden_act (gpt_neox) / activation_function (gptj): transformers'
 * "gelu" is exact (erf); "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" are the
 * tanh approximation (gelu_fast writes the same formula differently). */
static int read_gelu(const char *path, const json_t *root, const char *key, const char *dflt,
                     ft_model_config *c, ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    if (j && !json_is_null(j) && !json_is_string(j))
        return ft_fail(err, "%s: \"%s\" must be a string", path, key);
    const char *act = j && json_is_string(j) ? json_string_value(j) : dflt;
    if (strcmp(act, "gelu") == 0) {
        c->gelu_tanh = false;
        return 0;
    }
    if (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0 ||
        strcmp(act, "gelu_fast") == 0) {
        c->gelu_tanh = true;
        return 0;
    }
    return ft_fail(err, "%s: \"%s\" is \"%s\"; ftmpi's GELU MLP has \"gelu\" (exact) and "
                   "\"gelu_new\" / \"gelu_pytorch_tanh\" / \"gelu_fast\" (tanh)", path, key, act);
}

/* GPT-NeoX (GPTNeoXConfig), after its plain fields (read_fields; layer_norm_eps,
 * use_parallel_residual and attention_bias have defaults): hidden_act ("gelu"), and
 * the rotary fields: partial_rotary_factor and rope_theta in rope_parameters
 * (transformers 5) or the legacy rotary_pct (0.25) and rotary_emb_base (10000).
 * HF rotates int(head_dim * pct) dims. */
static int read_gpt_neox(const char *path, const json_t *root, ft_model_config *c,
                         ft_hf_config_info *info, ft_error *err)
{
    if (read_gelu(path, root, "hidden_act", "gelu", c, err))
        return -1;
    if (c->hidden_size % c->num_attention_heads != 0)
        return ft_fail(err, "%s: hidden_size %d is not a multiple of num_attention_heads %d", path,
                       c->hidden_size, c->num_attention_heads);
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = c->hidden_size / c->num_attention_heads;
    const json_t *params = json_object_get(root, "rope_parameters");
    if (params && !json_is_null(params) && !json_is_object(params))
        return ft_fail(err, "%s: \"rope_parameters\" must be an object", path);
    const bool in_params = params && json_is_object(params);
    double pct, theta;
    if (in_params && json_object_get(params, "partial_rotary_factor")) {
        if (ft_hf_get_real(path, params, "rope_parameters.", "partial_rotary_factor", true, 0,
                           &pct, err))
            return -1;
    } else {
        if (!json_object_get(root, "rotary_pct"))
            ft_hf_add_note(info, "rotary_pct absent: 0.25 (the GPTNeoXConfig default)");
        if (ft_hf_get_real(path, root, "", "rotary_pct", false, 0.25, &pct, err))
            return -1;
    }
    if (in_params && json_object_get(params, "rope_theta")) {
        if (ft_hf_get_real(path, params, "rope_parameters.", "rope_theta", true, 0, &theta, err))
            return -1;
    } else {
        if (!json_object_get(root, "rotary_emb_base"))
            ft_hf_add_note(info, "rotary_emb_base absent: 10000 (the GPTNeoXConfig default)");
        if (ft_hf_get_real(path, root, "", "rotary_emb_base", false, 10000.0, &theta, err))
            return -1;
    }
    if (in_params) {
        const json_t *t = json_object_get(params, "rope_type");
        if (t && (!json_is_string(t) || strcmp(json_string_value(t), "default") != 0))
            return ft_fail(err, "%s: rope_parameters.rope_type must be \"default\" (ftmpi has "
                           "no RoPE scaling for gpt_neox)", path);
    }
    if (!(pct > 0 && pct <= 1))
        return ft_fail(err, "%s: rotary_pct %g must be in (0, 1]", path, pct);
    c->rotary_dim = (int)(c->head_dim * pct);
    c->rope_theta = theta;
    return 0;
}

/* GPT-J (GPTJConfig), after its plain fields (read_fields: n_embd, n_layer, n_head,
 * n_positions, layer_norm_epsilon): rotary_dim (64), n_inner (null: 4 n_embd),
 * activation_function ("gelu_new"). RoPE's base is fixed at 10000. */
static int read_gptj(const char *path, const json_t *root, ft_model_config *c,
                     ft_hf_config_info *info, ft_error *err)
{
    if (read_gelu(path, root, "activation_function", "gelu_new", c, err))
        return -1;
    if (c->hidden_size % c->num_attention_heads != 0)
        return ft_fail(err, "%s: n_embd %d is not a multiple of n_head %d", path, c->hidden_size,
                       c->num_attention_heads);
    if ((long long)c->hidden_size * 4 > INT_MAX)
        return ft_fail(err, "%s: n_embd %d is too large", path, c->hidden_size);
    if (!json_object_get(root, "n_inner") || json_is_null(json_object_get(root, "n_inner")))
        ft_hf_add_note(info, "n_inner null: using 4 x n_embd");
    if (ft_hf_get_int(path, root, "n_inner", false, 4 * c->hidden_size, 1, &c->intermediate_size,
                      err))
        return -1;
    const json_t *rd = json_object_get(root, "rotary_dim");
    if (rd && json_is_null(rd))
        return ft_fail(err, "%s: \"rotary_dim\" is null; ftmpi needs GPT-J's partial rotary "
                       "width (an even number <= n_embd / n_head)", path);
    if (ft_hf_get_int(path, root, "rotary_dim", false, 64, 1, &c->rotary_dim, err))
        return -1;
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = c->hidden_size / c->num_attention_heads;
    c->rope_theta = 10000.0;
    return 0;
}

static const char *gelu_name(const ft_model_config *c)
{
    return c->gelu_tanh ? "gelu_new" : "gelu";
}

/* The Llama-keyed families: RoPE scaling as rope_scaling (llama3's block, or null). */
static void write_llama_quirks(hf_entries *out, const ft_model_config *c)
{
    const ft_rope_scaling *s = &c->rope_scaling;
    if (s->type != FT_ROPE_SCALING_LLAMA3) {
        ft_hf_put(out, "rope_scaling", "null");
        return;
    }
    char f[40], lo[40], hi[40];
    ft_hf_fmt_real(f, sizeof f, s->factor);
    ft_hf_fmt_real(lo, sizeof lo, s->low_freq_factor);
    ft_hf_fmt_real(hi, sizeof hi, s->high_freq_factor);
    ft_hf_put(out, "rope_scaling", "{\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n"
        "    \"low_freq_factor\": %s,\n    \"original_max_position_embeddings\": %d,\n"
        "    \"rope_type\": \"llama3\"\n  }", f, hi, lo, s->original_max_position_embeddings);
}

/* Qwen2/Qwen3 also say every layer is a full-attention layer (max_window_layers). */
static void write_qwen_quirks(hf_entries *out, const ft_model_config *c)
{
    write_llama_quirks(out, c);
    ft_hf_put(out, "max_window_layers", "%d", c->num_hidden_layers);
}

/* GPT-NeoX: the GELU by name, and the rotary width as the legacy rotary_pct
 * (transformers 5 still reads it). HF rotates int(head_dim * rotary_pct) dims, so the
 * fraction is nudged up until that product gives rotary_dim back (24/96 is below
 * 0.25 in binary otherwise). */
static void write_gpt_neox_quirks(hf_entries *out, const ft_model_config *c)
{
    double pct = (double)ft_model_rot_dim(c) / c->head_dim;
    while ((int)(c->head_dim * pct) < ft_model_rot_dim(c))
        pct = nextafter(pct, 2.0);
    ft_hf_put_real(out, "rotary_pct", pct);
    ft_hf_put(out, "hidden_act", "\"%s\"", gelu_name(c));
}

/* GPT-J: the GELU by name, and rotary_dim as a width (0, the whole head, spelled out). */
static void write_gptj_quirks(hf_entries *out, const ft_model_config *c)
{
    ft_hf_put(out, "rotary_dim", "%d", ft_model_rot_dim(c));
    ft_hf_put(out, "activation_function", "\"%s\"", gelu_name(c));
}

/* Keys save_pretrained writes that ftmpi has no field for: "key", "JSON text", ..., NULL. */
static const char *const llama_constants[] = {
    "attention_dropout", "0.0", "hidden_act", "\"silu\"", "initializer_range", "0.02",
    "mlp_bias", "false", "pretraining_tp", "1", "use_cache", "true", NULL };
static const char *const qwen_constants[] = {
    "attention_dropout", "0.0", "hidden_act", "\"silu\"", "initializer_range", "0.02",
    "use_cache", "true", "use_sliding_window", "false", NULL };
static const char *const mistral_constants[] = {
    "attention_dropout", "0.0", "hidden_act", "\"silu\"", "initializer_range", "0.02",
    "use_cache", "true", NULL };
static const char *const gpt_neox_constants[] = {
    "attention_dropout", "0.0", "hidden_dropout", "0.0", "initializer_range", "0.02",
    "use_cache", "true", NULL };
static const char *const gptj_constants[] = {
    "attn_pdrop", "0.0", "embd_pdrop", "0.0", "initializer_range", "0.02",
    "resid_pdrop", "0.0", "use_cache", "true", NULL };

static const hf_default gpt_neox_defaults[] = {
    { "layer_norm_eps", 1e-5, NULL },
    { "use_parallel_residual", 1, "use_parallel_residual absent: true (the GPTNeoXConfig default)" },
    { "attention_bias", 1, "attention_bias absent: true (the GPTNeoXConfig default)" },
    { NULL, 0, NULL } };
static const hf_default gptj_defaults[] = {
    { "n_positions", 2048, NULL }, { "layer_norm_epsilon", 1e-5, NULL }, { NULL, 0, NULL } };
static const hf_default no_defaults[] = { { NULL, 0, NULL } };

/* The keys a family's own reader reads (derived, defaulted from other fields, or
 * checked rather than stored); read_fields leaves them alone. */
static const char *const llama_own[] = { "num_key_value_heads", "head_dim", "bos_token_id",
    "eos_token_id", "rope_theta", "attention_bias", NULL };
static const char *const qwen2_own[] = { "num_key_value_heads", "head_dim", "bos_token_id",
    "eos_token_id", "rope_theta", "sliding_window", NULL };
static const char *const qwen3_own[] = { "num_key_value_heads", "head_dim", "bos_token_id",
    "eos_token_id", "rope_theta", "sliding_window", "attention_bias", NULL };
static const char *const mistral_own[] = { "num_key_value_heads", "head_dim", "bos_token_id",
    "eos_token_id", "rope_theta", "sliding_window", NULL };
static const char *const gpt_neox_own[] = { "bos_token_id", "eos_token_id", "rotary_pct",
    "hidden_act", "rotary_emb_base", NULL };
static const char *const gptj_own[] = { "bos_token_id", "eos_token_id", "n_inner", "rotary_dim",
    "activation_function", NULL };

/* One row per family (what a row's members mean: hf_config_internal.h). */
static const hf_family_adapter adapters[FT_FAMILY_COUNT] = {
    [FT_FAMILY_LLAMA] = { .own = llama_own, .defaults = no_defaults, .read_quirks = read_llama_quirks, .write_quirks = write_llama_quirks,
                          .constants = llama_constants },
    [FT_FAMILY_QWEN2] = { .own = qwen2_own, .defaults = no_defaults, .read_quirks = read_qwen2_quirks, .write_quirks = write_qwen_quirks,
                          .constants = qwen_constants },
    [FT_FAMILY_QWEN3] = { .own = qwen3_own, .defaults = no_defaults, .read_quirks = read_qwen3_quirks, .head_dim_default = 128,
                          .head_dim_note = "head_dim absent: using 128 (the Qwen3 default)",
                          .write_quirks = write_qwen_quirks, .constants = qwen_constants },
    [FT_FAMILY_MISTRAL] = { .own = mistral_own, .defaults = no_defaults, .read_quirks = read_mistral_quirks,
                            .write_quirks = write_llama_quirks, .constants = mistral_constants },
    [FT_FAMILY_GPT_NEOX] = { .own = gpt_neox_own, .defaults = gpt_neox_defaults, .read_shape = read_gpt_neox, .write_quirks = write_gpt_neox_quirks,
                             .constants = gpt_neox_constants },
    [FT_FAMILY_GPTJ] = { .own = gptj_own, .defaults = gptj_defaults, .read_shape = read_gptj, .write_quirks = write_gptj_quirks,
                         .constants = gptj_constants },
};

const hf_family_adapter *ft_hf_family_adapter(ft_model_family f)
{
    return &adapters[f];
}
