/* config.json <-> ft_model_config (io/hf_config.h). */
#include "io/hf_config.h"
#include "model/model_fields.h"
#include "util/input_file.h"
#include "util/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void add_note(ft_hf_config_info *info, const char *note)
{
    size_t used = strlen(info->notes);
    snprintf(info->notes + used, sizeof info->notes - used, "%s%s", used ? "; " : "", note);
}

/* An integer field in [lo, INT_MAX]; absent or null gives *v = dflt when optional. */
static int get_int(const char *path, const json_t *root, const char *key, bool required,
                   int dflt, int lo, int *v, ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j)) {
        if (required)
            return ft_fail(err, "%s: field \"%s\" is missing (required for a Llama model)", path,
                           key);
        *v = dflt;
        return 0;
    }
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > INT_MAX)
        return ft_fail(err, "%s: field \"%s\" must be an integer >= %d", path, key, lo);
    *v = (int)json_integer_value(j);
    return 0;
}

static int get_real(const char *path, const json_t *obj, const char *where, const char *key,
                    bool required, double dflt, double *v, ft_error *err)
{
    const json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j)) {
        if (required)
            return ft_fail(err, "%s: field \"%s%s\" is missing", path, where, key);
        *v = dflt;
        return 0;
    }
    if (!json_is_number(j))
        return ft_fail(err, "%s: field \"%s%s\" must be a number", path, where, key);
    *v = json_number_value(j);
    return 0;
}

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
        add_note(info, "sliding_window absent: using 4096 (the Mistral default)");
        c->sliding_window = 4096;
        return 0;
    }
    return get_int(path, root, "sliding_window", false, 0, 1, &c->sliding_window, err);
}

static int read_token_id(const char *path, const json_t *root, const char *key, int *id,
                         ft_hf_config_info *info, ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    *id = -1;
    if (!j || json_is_null(j))
        return 0;
    if (json_is_array(j)) {
        if (json_array_size(j) == 0)
            return 0;
        if (strcmp(key, "eos_token_id") == 0)
            info->n_eos = (int)json_array_size(j);
        if (json_array_size(j) > 1) {
            char note[160];
            snprintf(note, sizeof note, "%s is a list of %zu ids; ftmpi keeps the first", key,
                     json_array_size(j));
            add_note(info, note);
        }
        j = json_array_get(j, 0);
    }
    if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > INT_MAX)
        return ft_fail(err, "%s: field \"%s\" must be a token id (integer), a list of them or "
                       "null", path, key);
    *id = (int)json_integer_value(j);
    return 0;
}

/* rope_scaling (transformers <= 4) or rope_parameters (transformers 5), with the
 * type under "rope_type" or the legacy "type". */
static int read_rope(const char *path, const json_t *root, ft_model_config *c,
                     ft_hf_config_info *info, ft_error *err)
{
    const json_t *params = json_object_get(root, "rope_parameters");
    const json_t *scaling = json_object_get(root, "rope_scaling");
    const char *where = "rope_scaling.";
    if (params && !json_is_null(params)) {
        if (!json_is_object(params))
            return ft_fail(err, "%s: \"rope_parameters\" must be an object", path);
        if (!scaling || json_is_null(scaling)) {
            scaling = params;
            where = "rope_parameters.";
        }
    }
    /* rope_theta: top level, else inside rope_parameters, else HF's default */
    const json_t *theta_obj = json_object_get(root, "rope_theta") ? root : params;
    if (theta_obj && json_is_object(theta_obj) && json_object_get(theta_obj, "rope_theta")) {
        if (get_real(path, theta_obj, theta_obj == root ? "" : "rope_parameters.", "rope_theta",
                     true, 0, &c->rope_theta, err))
            return -1;
    } else {
        c->rope_theta = 10000.0;
        add_note(info, "rope_theta absent: using 10000.0 (the Llama default)");
    }
    c->rope_scaling.type = FT_ROPE_SCALING_NONE;
    if (!scaling || json_is_null(scaling))
        return 0;
    if (!json_is_object(scaling))
        return ft_fail(err, "%s: \"rope_scaling\" must be an object or null", path);
    const json_t *t = json_object_get(scaling, "rope_type");
    if (!t)
        t = json_object_get(scaling, "type");
    if (t && !json_is_string(t))
        return ft_fail(err, "%s: \"%srope_type\" must be a string", path, where);
    const char *type = t ? json_string_value(t) : "default";
    if (strcmp(type, "default") == 0)
        return 0;
    if (strcmp(type, "llama3") != 0)
        return ft_fail(err, "%s: \"%srope_type\" is \"%s\"; ftmpi supports RoPE scaling "
                       "\"llama3\" or none", path, where, type);
    ft_rope_scaling *s = &c->rope_scaling;
    s->type = FT_ROPE_SCALING_LLAMA3;
    double orig;
    if (get_real(path, scaling, where, "factor", true, 0, &s->factor, err) ||
        get_real(path, scaling, where, "low_freq_factor", true, 0, &s->low_freq_factor, err) ||
        get_real(path, scaling, where, "high_freq_factor", true, 0, &s->high_freq_factor, err) ||
        get_real(path, scaling, where, "original_max_position_embeddings", true, 0, &orig, err))
        return -1;
    if (!(orig >= 1 && orig <= INT_MAX) || orig != (double)(int)orig)
        return ft_fail(err, "%s: \"%soriginal_max_position_embeddings\" must be a positive "
                       "integer", path, where);
    s->original_max_position_embeddings = (int)orig;
    return 0;
}

/* The family from model_type, confirmed by architectures when present (the causal
 * LM class of that family must be listed). */
static int check_model_kind(const char *path, const json_t *root, ft_model_config *c,
                            ft_error *err)
{
    const json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt))
        return ft_fail(err, "%s: field \"model_type\" is missing (e.g. \"model_type\": "
                       "\"llama\"; ftmpi has %s)", path, ft_family_names());
    const ft_family_info *fam = ft_family_by_name(json_string_value(mt));
    if (!fam)
        return ft_fail(err, "%s: model_type is \"%s\", not a family ftmpi has; ftmpi-convert "
                       "handles model_type %s (LlamaForCausalLM, Qwen2ForCausalLM, "
                       "Qwen3ForCausalLM, MistralForCausalLM, GPTNeoXForCausalLM, "
                       "GPTJForCausalLM)", path, json_string_value(mt),
                       ft_family_names());
    c->family = fam->family;
    const json_t *arch = json_object_get(root, "architectures");
    if (arch && !json_is_null(arch)) {
        bool found = false;
        size_t i;
        json_t *a;
        if (!json_is_array(arch))
            return ft_fail(err, "%s: \"architectures\" must be a list", path);
        json_array_foreach(arch, i, a) found |= json_is_string(a) &&
                                               strcmp(json_string_value(a), fam->architecture) == 0;
        if (!found)
            return ft_fail(err, "%s: \"architectures\" does not list %s; ftmpi-convert handles "
                           "the causal-LM class of model_type \"%s\"", path, fam->architecture,
                           fam->name);
    }
    const json_t *act = json_object_get(root, "hidden_act");
    if (!fam->gelu_mlp && act &&
        (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return ft_fail(err, "%s: \"hidden_act\" must be \"silu\" (ftmpi's MLP is SwiGLU)", path);
    return 0;
}

/* ------------------------------------------------------------ GPT families */

/* A boolean field; absent or null gives dflt. */
static int get_bool(const char *path, const json_t *root, const char *key, bool dflt, bool *v,
                    ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j)) {
        *v = dflt;
        return 0;
    }
    if (!json_is_boolean(j))
        return ft_fail(err, "%s: \"%s\" must be true or false", path, key);
    *v = json_is_true(j);
    return 0;
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
        if (get_real(path, params, "rope_parameters.", "partial_rotary_factor", true, 0, &pct, err))
            return -1;
    } else {
        if (!json_object_get(root, "rotary_pct"))
            add_note(info, "rotary_pct absent: 0.25 (the GPTNeoXConfig default)");
        if (get_real(path, root, "", "rotary_pct", false, 0.25, &pct, err))
            return -1;
    }
    if (in_params && json_object_get(params, "rope_theta")) {
        if (get_real(path, params, "rope_parameters.", "rope_theta", true, 0, &theta, err))
            return -1;
    } else {
        if (!json_object_get(root, "rotary_emb_base"))
            add_note(info, "rotary_emb_base absent: 10000 (the GPTNeoXConfig default)");
        if (get_real(path, root, "", "rotary_emb_base", false, 10000.0, &theta, err))
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
        add_note(info, "n_inner null: using 4 x n_embd");
    if (get_int(path, root, "n_inner", false, 4 * c->hidden_size, 1, &c->intermediate_size, err))
        return -1;
    const json_t *rd = json_object_get(root, "rotary_dim");
    if (rd && json_is_null(rd))
        return ft_fail(err, "%s: \"rotary_dim\" is null; ftmpi needs GPT-J's partial rotary "
                       "width (an even number <= n_embd / n_head)", path);
    if (get_int(path, root, "rotary_dim", false, 64, 1, &c->rotary_dim, err))
        return -1;
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = c->hidden_size / c->num_attention_heads;
    c->rope_theta = 10000.0;
    return 0;
}

/* ------------------------------------------------------- writer's pieces */

/* Shortest text that reads back as v, with a ".0" so JSON readers see a float (as
 * Python's json writes 1e-05 and 10000.0). */
static void fmt_real(char *buf, size_t len, double v)
{
    if (v == (double)(long long)v && v > -1e16 && v < 1e16) { /* 500000.0, not 5e+05 */
        snprintf(buf, len, "%.1f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

/* config.json as written: its keys with their values' JSON text, printed sorted by key
 * (as transformers' save_pretrained does; see by_key). */
typedef struct hf_entry {
    const char *key;
    char value[256];
} hf_entry;

typedef struct hf_entries {
    hf_entry e[48];
    size_t n;
} hf_entries;

static bool has_key(const hf_entries *out, const char *key)
{
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->e[i].key, key) == 0)
            return true;
    return false;
}

/* Adds key with the printf-formatted JSON text. The keys are a fixed few (one per
 * field plus a family's constants, under 30), so the array does not fill. */
static void put(hf_entries *out, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put(hf_entries *out, const char *key, const char *fmt, ...)
{
    if (out->n == sizeof out->e / sizeof out->e[0])
        return;
    hf_entry *e = &out->e[out->n++];
    e->key = key;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->value, sizeof e->value, fmt, ap);
    va_end(ap);
}

static void put_real(hf_entries *out, const char *key, double v)
{
    char buf[40];
    fmt_real(buf, sizeof buf, v);
    put(out, key, "%s", buf);
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
        put(out, "rope_scaling", "null");
        return;
    }
    char f[40], lo[40], hi[40];
    fmt_real(f, sizeof f, s->factor);
    fmt_real(lo, sizeof lo, s->low_freq_factor);
    fmt_real(hi, sizeof hi, s->high_freq_factor);
    put(out, "rope_scaling", "{\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n"
        "    \"low_freq_factor\": %s,\n    \"original_max_position_embeddings\": %d,\n"
        "    \"rope_type\": \"llama3\"\n  }", f, hi, lo, s->original_max_position_embeddings);
}

/* Qwen2/Qwen3 also say every layer is a full-attention layer (max_window_layers). */
static void write_qwen_quirks(hf_entries *out, const ft_model_config *c)
{
    write_llama_quirks(out, c);
    put(out, "max_window_layers", "%d", c->num_hidden_layers);
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
    put_real(out, "rotary_pct", pct);
    put(out, "hidden_act", "\"%s\"", gelu_name(c));
}

/* GPT-J: the GELU by name, and rotary_dim as a width (0, the whole head, spelled out). */
static void write_gptj_quirks(hf_entries *out, const ft_model_config *c)
{
    put(out, "rotary_dim", "%d", ft_model_rot_dim(c));
    put(out, "activation_function", "\"%s\"", gelu_name(c));
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

typedef void (*hf_writer)(hf_entries *out, const ft_model_config *c);

/* A plain field that config.json may leave out, and what its absence means. */
typedef struct hf_default {
    const char *key;
    double value;
    const char *note; /* said when the key is absent; NULL: nothing to say */
} hf_default;

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

typedef int (*hf_reader)(const char *path, const json_t *root, ft_model_config *c,
                         ft_hf_config_info *info, ft_error *err);

/* Each family's config.json, in one row. The keys of ftmpi's fields are the field
 * table's (model/model_fields.h, hf_key); a row says what else the family's file has.
 * Reading: every field with a key as its plain value (read_fields: required unless
 * `defaults` lists it), but those in `own`; then the GPT families' read_shape (their
 * GELU and rotary fields), or for the others read_quirks (what the family adds or
 * forbids) and the Llama-keyed reading of heads, head_dim (with head_dim_default,
 * 0: hidden_size / heads) and RoPE. Writing: every field that has a key, as its plain
 * value unless write_quirks gave the key a derived one, plus the constants. */
typedef struct hf_family_adapter {
    const char *const *own;
    const hf_default *defaults;
    hf_reader read_shape;
    hf_reader read_quirks;
    int head_dim_default;
    const char *head_dim_note; /* the note when head_dim_default is used */
    hf_writer write_quirks;
    const char *const *constants;
} hf_family_adapter;

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

static bool listed(const char *const *keys, const char *key)
{
    for (; *keys; keys++)
        if (strcmp(*keys, key) == 0)
            return true;
    return false;
}

/* Every field the family's config.json has under a key of the field table, read as
 * the field's type (ints >= 1; bools default to the row's absent value), in table
 * order; the adapter's own keys are left to its readers. */
static int read_fields(const char *path, const json_t *root, const hf_family_adapter *ad,
                       ft_model_config *c, ft_hf_config_info *info, ft_error *err)
{
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    for (size_t i = 0; i < n; i++) {
        const ft_model_field *f = &fields[i];
        const char *key = f->hf_key[c->family];
        if (!key || f->type == FT_FIELD_FAMILY || listed(ad->own, key))
            continue;
        const hf_default *d = ad->defaults;
        while (d->key && strcmp(d->key, key) != 0)
            d++;
        if (d->note && !json_object_get(root, key))
            add_note(info, d->note);
        const bool required = !d->key;
        int iv = 0;
        bool bv = false;
        double v;
        switch (f->type) {
        case FT_FIELD_INT:
            if (get_int(path, root, key, required, (int)d->value, 1, &iv, err))
                return -1;
            v = iv;
            break;
        case FT_FIELD_BOOL:
            if (get_bool(path, root, key, d->key ? d->value != 0 : f->absent != 0, &bv, err))
                return -1;
            v = bv;
            break;
        case FT_FIELD_DOUBLE:
            if (get_real(path, root, "", key, required, d->value, &v, err))
                return -1;
            break;
        default:
            continue;
        }
        ft_model_field_set(c, f, v);
    }
    return 0;
}

int ft_hf_config_read(const char *path, ft_model_config *c, ft_hf_config_info *info,
                      ft_error *err)
{
    memset(c, 0, sizeof *c);
    memset(info, 0, sizeof *info);
    json_error_t je;
    char *text;
    size_t len;
    ft_error read_err;
    if (ft_input_read(path, "a config.json", FT_INPUT_MAX_JSON, &text, &len, &read_err))
        return ft_fail(err, "%s%s", read_err.msg, access(path, F_OK) != 0
                       ? " (is this a Hugging Face model directory?)" : "");
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root)
        return ft_fail(err, "%s:%d: not valid JSON: %s", path, je.line, je.text);
    int rc = -1;
    if (!json_is_object(root)) {
        ft_fail(err, "%s: not a JSON object", path);
        goto done;
    }
    if (check_model_kind(path, root, c, err))
        goto done;
    const hf_family_adapter *ad = &adapters[c->family];
    if (read_fields(path, root, ad, c, info, err))
        goto done;
    if (ad->read_shape) {
        if (ad->read_shape(path, root, c, info, err) ||
            read_token_id(path, root, "bos_token_id", &c->bos_token_id, info, err) ||
            read_token_id(path, root, "eos_token_id", &c->eos_token_id, info, err))
            goto done;
        goto common;
    }
    if (ad->read_quirks(path, root, c, info, err))
        goto done;
    if (!json_object_get(root, "num_key_value_heads") ||
        json_is_null(json_object_get(root, "num_key_value_heads")))
        add_note(info, "num_key_value_heads absent: using num_attention_heads");
    if (get_int(path, root, "num_key_value_heads", false, c->num_attention_heads, 1,
                &c->num_key_value_heads, err))
        goto done;
    /* head_dim when absent: the family's default, or derived */
    const json_t *hd = json_object_get(root, "head_dim");
    const bool hd_given = hd && !json_is_null(hd);
    int hd_default = ad->head_dim_default;
    if (hd_default) {
        if (!hd_given)
            add_note(info, ad->head_dim_note);
    } else if (c->hidden_size % c->num_attention_heads == 0) {
        hd_default = c->hidden_size / c->num_attention_heads;
    } else if (!hd_given) {
        ft_fail(err, "%s: hidden_size %d is not a multiple of num_attention_heads %d and "
                "\"head_dim\" is not given", path, c->hidden_size, c->num_attention_heads);
        goto done;
    }
    if (get_int(path, root, "head_dim", false, hd_default, 1, &c->head_dim, err) ||
        read_rope(path, root, c, info, err) ||
        read_token_id(path, root, "bos_token_id", &c->bos_token_id, info, err) ||
        read_token_id(path, root, "eos_token_id", &c->eos_token_id, info, err))
        goto done;
common:;
    const json_t *dt = json_object_get(root, "torch_dtype");
    if (!json_is_string(dt))
        dt = json_object_get(root, "dtype"); /* transformers 5 renamed it */
    if (json_is_string(dt))
        snprintf(info->torch_dtype, sizeof info->torch_dtype, "%s", json_string_value(dt));
    if (ft_model_config_validate(c, err)) {
        ft_fail_context(err, "%s", path);
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------------ writer */

/* A field's plain value in config.json: an int (null where it means "none": a token id
 * of -1, a sliding window of 0), a bool, a float, or the family's model_type. */
static void put_field(hf_entries *out, const char *key, const ft_model_config *c,
                      const ft_model_field *f)
{
    const double v = ft_model_field_get(c, f);
    switch (f->type) {
    case FT_FIELD_INT:
        if (v < 0 || (f->omit_when_absent && v == f->absent))
            put(out, key, "null");
        else
            put(out, key, "%d", (int)v);
        break;
    case FT_FIELD_BOOL: put(out, key, "%s", v != 0.0 ? "true" : "false"); break;
    case FT_FIELD_DOUBLE: put_real(out, key, v); break;
    case FT_FIELD_FAMILY: put(out, key, "\"%s\"", ft_model_family_of(c)->name); break;
    }
}

/* Sorted by key, but "architectures" first: ftmpi's files have always begun with it
 * (GPT-J's "activation_function" sorts before it) and keep their bytes. */
static int by_key(const void *a, const void *b)
{
    const char *ka = ((const hf_entry *)a)->key, *kb = ((const hf_entry *)b)->key;
    const bool arch_a = strcmp(ka, "architectures") == 0, arch_b = strcmp(kb, "architectures") == 0;
    if (arch_a || arch_b)
        return arch_b - arch_a;
    return strcmp(ka, kb);
}

int ft_hf_config_write(const char *path, const ft_model_config *c, const char *torch_dtype,
                       ft_error *err)
{
    const hf_family_adapter *ad = &adapters[c->family];
    hf_entries out = { .n = 0 };
    put(&out, "architectures", "[\n    \"%s\"\n  ]", ft_model_family_of(c)->architecture);
    put(&out, "torch_dtype", "\"%s\"", torch_dtype);
    ad->write_quirks(&out, c);
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    for (size_t i = 0; i < n; i++) {
        const char *key = fields[i].hf_key[c->family];
        if (key && !has_key(&out, key))
            put_field(&out, key, c, &fields[i]);
    }
    for (const char *const *k = ad->constants; *k; k += 2)
        put(&out, k[0], "%s", k[1]);
    qsort(out.e, out.n, sizeof out.e[0], by_key);

    FILE *fp; /* made new (util/output_file.h): never written through a planted symlink */
    if (ft_output_fopen_tmp(path, &fp, err))
        return -1;
    fprintf(fp, "{\n");
    for (size_t i = 0; i < out.n; i++)
        fprintf(fp, "  \"%s\": %s%s\n", out.e[i].key, out.e[i].value, i + 1 < out.n ? "," : "");
    fprintf(fp, "}\n");
    int bad = ferror(fp);
    bad |= fflush(fp) != 0 || fsync(fileno(fp)) != 0;
    bad |= fclose(fp) != 0;
    return bad ? ft_fail(err, "%s: write failed: %s", path, strerror(errno)) : 0;
}
