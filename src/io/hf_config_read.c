/* Reading a Hugging Face config.json into ft_model_config (io/hf_config.h): the
 * file as JSON, the family from model_type and architectures, every field the field
 * table keys (model/model_fields.h), then the family's own readers
 * (hf_config_family.c) or the Llama-keyed heads, head_dim and RoPE, the token ids and
 * the dtype; and the typed getters the family readers share (hf_config_internal.h). */
#include "io/hf_config.h"
#include "io/hf_config_internal.h"
#include "model/model_fields.h"
#include "util/input_file.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ft_hf_add_note(ft_hf_config_info *info, const char *note)
{
    size_t used = strlen(info->notes);
    snprintf(info->notes + used, sizeof info->notes - used, "%s%s", used ? "; " : "", note);
}

int ft_hf_get_int(const char *path, const json_t *root, const char *key, bool required,
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

int ft_hf_get_real(const char *path, const json_t *obj, const char *where, const char *key,
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
            ft_hf_add_note(info, note);
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
        if (ft_hf_get_real(path, theta_obj, theta_obj == root ? "" : "rope_parameters.",
                           "rope_theta", true, 0, &c->rope_theta, err))
            return -1;
    } else {
        c->rope_theta = 10000.0;
        ft_hf_add_note(info, "rope_theta absent: using 10000.0 (the Llama default)");
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
    if (ft_hf_get_real(path, scaling, where, "factor", true, 0, &s->factor, err) ||
        ft_hf_get_real(path, scaling, where, "low_freq_factor", true, 0, &s->low_freq_factor,
                       err) ||
        ft_hf_get_real(path, scaling, where, "high_freq_factor", true, 0, &s->high_freq_factor,
                       err) ||
        ft_hf_get_real(path, scaling, where, "original_max_position_embeddings", true, 0, &orig,
                       err))
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
            ft_hf_add_note(info, d->note);
        const bool required = !d->key;
        int iv = 0;
        bool bv = false;
        double v;
        switch (f->type) {
        case FT_FIELD_INT:
            if (ft_hf_get_int(path, root, key, required, (int)d->value, 1, &iv, err))
                return -1;
            v = iv;
            break;
        case FT_FIELD_BOOL:
            if (get_bool(path, root, key, d->key ? d->value != 0 : f->absent != 0, &bv, err))
                return -1;
            v = bv;
            break;
        case FT_FIELD_DOUBLE:
            if (ft_hf_get_real(path, root, "", key, required, d->value, &v, err))
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
    const hf_family_adapter *ad = ft_hf_family_adapter(c->family);
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
        ft_hf_add_note(info, "num_key_value_heads absent: using num_attention_heads");
    if (ft_hf_get_int(path, root, "num_key_value_heads", false, c->num_attention_heads, 1,
                      &c->num_key_value_heads, err))
        goto done;
    /* head_dim when absent: the family's default, or derived */
    const json_t *hd = json_object_get(root, "head_dim");
    const bool hd_given = hd && !json_is_null(hd);
    int hd_default = ad->head_dim_default;
    if (hd_default) {
        if (!hd_given)
            ft_hf_add_note(info, ad->head_dim_note);
    } else if (c->hidden_size % c->num_attention_heads == 0) {
        hd_default = c->hidden_size / c->num_attention_heads;
    } else if (!hd_given) {
        ft_fail(err, "%s: hidden_size %d is not a multiple of num_attention_heads %d and "
                "\"head_dim\" is not given", path, c->hidden_size, c->num_attention_heads);
        goto done;
    }
    if (ft_hf_get_int(path, root, "head_dim", false, hd_default, 1, &c->head_dim, err) ||
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
