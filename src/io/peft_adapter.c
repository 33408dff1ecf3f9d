/* PEFT LoRA adapter directories, read and written (io/peft_adapter.h). */
#include "io/peft_adapter.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/family.h"
#include "util/bf16.h"
#include "util/durable.h"
#include "util/input_file.h"
#include "util/output_file.h"
#include "util/path_join.h"

#define PEFT_KEY_PREFIX "base_model.model."

/* ------------------------------------------------------------------ names */

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int ft_peft_key(const ft_model_config *c, const char *name, char *key, size_t size)
{
    int layer, skip = 0;
    if (sscanf(name, "model.layers.%d.%n", &layer, &skip) != 1 || skip == 0)
        return -1;
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        char path[FT_TENSOR_NAME_MAX], hf[FT_TENSOR_NAME_MAX + 32];
        ft_lora_site_path((ft_lora_site)s, layer, path, sizeof path);
        const size_t n = strlen(path);
        if (strncmp(name, path, n) != 0 || name[n] != '.' ||
            !ft_lora_site_hf_name(c, (ft_lora_site)s))
            continue;
        ft_lora_site_hf_path(c, (ft_lora_site)s, layer, hf, sizeof hf);
        int w = snprintf(key, size, PEFT_KEY_PREFIX "%s%s", hf, name + n);
        return w < 0 || (size_t)w >= size ? -1 : 0;
    }
    return -1;
}

/* GPT-NeoX's fused B: HF row r (head by head: q, k, v rows of each head) is ftmpi row
 * part * heads * head_dim + head * head_dim + r % head_dim (q rows, k rows, v rows),
 * with block = r / head_dim, head = block / 3, part = block % 3. */
bool ft_peft_is_fused_b(const char *name) { return ends_with(name, ".qkv_proj.lora_B.weight"); }

long long ft_peft_neox_row(const ft_model_config *c, long long r)
{
    const long long hd = c->head_dim, block = r / hd;
    return (block % 3) * c->num_attention_heads * hd + (block / 3) * hd + r % hd;
}

/* ------------------------------------------------------------------ reading */

/* IEEE half -> float, exactly: (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 m/1024. */
static float f16_value(uint16_t h)
{
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0x1f)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, -24);
    else
        v = ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void to_f32(ft_st_dtype dt, const void *src, float *dst, size_t n)
{
    const uint16_t *h = src;
    if (dt == FT_ST_F32)
        memcpy(dst, src, n * sizeof *dst);
    else if (dt == FT_ST_BF16)
        for (size_t i = 0; i < n; i++)
            dst[i] = ft_bf16_to_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = f16_value(h[i]);
}

/* A key that must be absent, null, false, "" or empty ({} / []), i.e. a PEFT feature
 * left at its default; why says what ftmpi would get wrong. */
static int require_default(const char *path, const json_t *root, const char *key,
                           const char *why, ft_error *err)
{
    const json_t *j = json_object_get(root, key);
    if (!j || json_is_null(j) || json_is_false(j) ||
        (json_is_string(j) && json_string_length(j) == 0) ||
        (json_is_object(j) && json_object_size(j) == 0) ||
        (json_is_array(j) && json_array_size(j) == 0))
        return 0;
    return ft_fail(err, "%s: \"%s\" is set; %s (ftmpi reads plain LoRA adapters: save the "
                   "adapter without it)", path, key, why);
}

/* target_modules (a list of module names, or one name) -> NULL-terminated names
 * borrowed from root. */
static int read_targets(const char *path, const json_t *root, char ***out, ft_error *err)
{
    const json_t *t = json_object_get(root, "target_modules");
    *out = NULL;
    if (!t || json_is_null(t))
        return ft_fail(err, "%s: \"target_modules\" is missing; list the adapted modules, "
                       "e.g. [\"q_proj\", \"v_proj\"]", path);
    if (!json_is_array(t) && !json_is_string(t))
        return ft_fail(err, "%s: \"target_modules\" must be a list of module names", path);
    const size_t n = json_is_array(t) ? json_array_size(t) : 1;
    char **names = calloc(n + 1, sizeof *names);
    if (!names)
        return ft_fail(err, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
        if (!json_is_string(e)) {
            free(names);
            return ft_fail(err, "%s: target_modules[%zu] is not a string", path, i);
        }
        names[i] = (char *)json_string_value(e);
    }
    *out = names;
    return 0;
}

/* The scalar fields: peft_type, r, lora_alpha, lora_dropout, bias, base model. */
static int check_scalars(const char *path, const json_t *root, ft_error *err)
{
    const json_t *pt = json_object_get(root, "peft_type");
    const json_t *r = json_object_get(root, "r"), *al = json_object_get(root, "lora_alpha");
    const json_t *dr = json_object_get(root, "lora_dropout"), *bias = json_object_get(root, "bias");
    const json_t *bm = json_object_get(root, "base_model_name_or_path");
    if (!json_is_string(pt) || strcmp(json_string_value(pt), "LORA") != 0)
        return ft_fail(err, "%s: \"peft_type\" is %s%s%s; ftmpi reads LoRA adapters (\"LORA\")",
                       path, json_is_string(pt) ? "\"" : "",
                       json_is_string(pt) ? json_string_value(pt) : "missing",
                       json_is_string(pt) ? "\"" : "");
    if (!json_is_integer(r) || json_integer_value(r) < 1 || json_integer_value(r) > 65536)
        return ft_fail(err, "%s: \"r\" must be an integer from 1 to 65536 (the adapters' rank)",
                       path);
    if (!json_is_number(al) || !(json_number_value(al) > 0))
        return ft_fail(err, "%s: \"lora_alpha\" must be a number > 0", path);
    if (dr && !json_is_null(dr) &&
        (!json_is_number(dr) || json_number_value(dr) < 0 || json_number_value(dr) >= 1))
        return ft_fail(err, "%s: \"lora_dropout\" must be a number in [0, 1)", path);
    if (bias && !json_is_null(bias) &&
        (!json_is_string(bias) || strcmp(json_string_value(bias), "none") != 0))
        return ft_fail(err, "%s: \"bias\" must be \"none\"; ftmpi does not train or export "
                       "biases with adapters", path);
    if (bm && !json_is_null(bm) && !json_is_string(bm))
        return ft_fail(err, "%s: \"base_model_name_or_path\" must be a string or null", path);
    return 0;
}

/* PEFT features that change the computation or the saved tensors. */
static int check_plain_lora(const char *path, const json_t *root, ft_error *err)
{
    static const char *const keys[][2] = {
        { "use_rslora", "rank-stabilised scaling (alpha / sqrt(r)) is not ftmpi's alpha / r" },
        { "use_dora", "DoRA adds a magnitude vector" },
        { "fan_in_fan_out", "transposed (Conv1D) weights are not ftmpi's layout" },
        { "layers_to_transform", "ftmpi adapts every layer" },
        { "rank_pattern", "per-module ranks differ from r" },
        { "alpha_pattern", "per-module alphas differ from lora_alpha" },
        { "modules_to_save", "fully trained extra modules would be lost" },
        { "lora_bias", "LoRA biases are not ftmpi's" },
        { "exclude_modules", "ftmpi adapts the targets of every layer" },
        { "layer_replication", "ftmpi does not replicate layers" },
        { "target_parameters", "ftmpi adapts modules, not parameters" },
        { "trainable_token_indices", "trained embedding rows would be lost" },
        { "use_qalora", "QA-LoRA pools the inputs of A" },
        { "alora_invocation_tokens", "activated LoRA applies from an invocation token on" },
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (require_default(path, root, keys[i][0], keys[i][1], err))
            return -1;
    return 0;
}

static int read_config(ft_peft_adapter *a, const char *path, const ft_model_config *base,
                       ft_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (ft_input_read(path, "a PEFT adapter_config.json", FT_INPUT_MAX_JSON, &text, &len, err))
        return -1;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return ft_fail(err, "%s: not a JSON object (line %d: %s)", path, je.line, je.text);
    }
    char **targets = NULL;
    int rc = check_scalars(path, root, err) || check_plain_lora(path, root, err) ||
             read_targets(path, root, &targets, err);
    if (!rc) {
        const json_t *dr = json_object_get(root, "lora_dropout");
        const json_t *bm = json_object_get(root, "base_model_name_or_path");
        if (ft_lora_resolve(base, (int)json_integer_value(json_object_get(root, "r")),
                            json_number_value(json_object_get(root, "lora_alpha")),
                            json_is_number(dr) ? json_number_value(dr) : 0.0, targets, &a->lora,
                            err))
            rc = ft_fail_context(err, "%s: target_modules", path);
        snprintf(a->base_model, sizeof a->base_model, "%s",
                 json_is_string(bm) ? json_string_value(bm) : "");
    }
    free(targets);
    json_decref(root);
    return rc ? -1 : 0;
}

static void shape_text(char *buf, size_t size, int ndim, const uint64_t *shape)
{
    int n = snprintf(buf, size, "[");
    for (int d = 0; d < ndim && n >= 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%llu", d ? ", " : "",
                      (unsigned long long)shape[d]);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* A key that is none of the layout's tensors' (then the counts differ). */
static int check_no_extra(const ft_peft_adapter *a, ft_error *err)
{
    const ft_model_layout *l = &a->layout;
    for (int k = 0; k < a->st.n_tensors; k++) {
        bool used = false;
        for (int i = 0; i < l->total_tensors && !used; i++)
            used = a->src[i] == &a->st.tensors[k];
        if (!used)
            return ft_fail(err, "%s: key '%s' is not a LoRA tensor of adapter_config.json's "
                           "target_modules in a %d-layer base; remove it or give the matching "
                           "base", a->st.path, a->st.tensors[k].name,
                           l->config.num_hidden_layers);
    }
    return 0;
}

/* Maps every layout tensor to its key, checking shape and dtype. */
static int map_keys(ft_peft_adapter *a, ft_error *err)
{
    const ft_model_layout *l = &a->layout;
    a->src = calloc((size_t)l->total_tensors, sizeof *a->src);
    if (!a->src)
        return ft_fail(err, "out of host memory");
    for (int i = 0; i < l->total_tensors; i++) {
        const ft_tensor_info *t = ft_model_layout_tensor_at(l, i);
        char key[FT_TENSOR_NAME_MAX + 64], want[64], got[64];
        if (ft_peft_key(&l->config, t->name, key, sizeof key))
            return ft_fail(err, "internal: no PEFT key for %s", t->name);
        const ft_st_tensor *s = ft_st_find(&a->st, key);
        const uint64_t shape[2] = { (uint64_t)t->shape[0], (uint64_t)t->shape[1] };
        shape_text(want, sizeof want, 2, shape);
        if (!s)
            return ft_fail(err, "%s: key '%s' %s is missing (adapter_config.json targets that "
                           "module in every layer); save the complete adapter", a->st.path, key,
                           want);
        shape_text(got, sizeof got, s->ndim, s->shape);
        if (s->ndim != 2 || s->shape[0] != shape[0] || s->shape[1] != shape[1])
            return ft_fail(err, "%s: key '%s' has shape %s; r = %d and the base model's shape "
                           "imply %s (is it an adapter of this base, with this r?)",
                           a->st.path, key, got, a->lora.rank, want);
        if (!ft_st_dtype_is_weight(s->dtype))
            return ft_fail(err, "%s: key '%s' has dtype %s; use F32, BF16 or F16", a->st.path,
                           key, ft_st_dtype_name(s->dtype));
        a->src[i] = s;
    }
    return a->st.n_tensors != l->total_tensors ? check_no_extra(a, err) : 0;
}

int ft_peft_adapter_open(ft_peft_adapter *a, const char *dir, const ft_model_config *base,
                         ft_error *err)
{
    memset(a, 0, sizeof *a);
    a->st.fd = -1;
    snprintf(a->dir, sizeof a->dir, "%s", dir);
    char path[4200];
    ft_path_join(path, sizeof path, dir, FT_PEFT_CONFIG_NAME);
    if (access(path, F_OK) != 0)
        return ft_fail(err, "%s: no " FT_PEFT_CONFIG_NAME " (give a PEFT adapter directory, as "
                       "PeftModel.save_pretrained writes it)", dir);
    if (read_config(a, path, base, err))
        return -1;
    ft_path_join(path, sizeof path, dir, FT_PEFT_WEIGHTS_NAME);
    if (access(path, F_OK) != 0) {
        char bin[4200];
        ft_path_join(bin, sizeof bin, dir, "adapter_model.bin");
        return ft_fail(err, "%s: no " FT_PEFT_WEIGHTS_NAME "%s", dir,
                       access(bin, F_OK) == 0 ? " (only adapter_model.bin: save the adapter "
                                                "with safe_serialization=True)" : "");
    }
    if (ft_lora_layout_build(&a->layout, base, &a->lora, err))
        return -1;
    if (ft_st_open(&a->st, path, FT_ST_ANY_DTYPE, err)) {
        a->st.fd = -1;
        ft_model_layout_free(&a->layout);
        return -1;
    }
    if (map_keys(a, err)) {
        ft_peft_adapter_close(a);
        return -1;
    }
    return 0;
}

void ft_peft_adapter_close(ft_peft_adapter *a)
{
    if (a->st.fd >= 0)
        ft_st_close(&a->st);
    a->st.fd = -1;
    free(a->src);
    a->src = NULL;
    ft_model_layout_free(&a->layout);
}

int ft_peft_adapter_read_tensor(const ft_peft_adapter *a, const ft_tensor_info *t, float *dst,
                                ft_error *err)
{
    int u, k;
    if (ft_model_layout_find(&a->layout, t->name, &u, &k))
        return ft_fail(err, "%s: adapter tensor %s is not in this adapter (its target_modules)",
                       a->dir, t->name);
    const ft_st_tensor *s = a->src[a->layout.units[u].first_tensor + k];
    const size_t n = t->numel, es = ft_st_dtype_size(s->dtype);
    void *raw = malloc(n * es);
    float *hf = ft_peft_is_fused_b(t->name) ? malloc(n * sizeof *hf) : dst;
    int rc = raw && hf ? 0 : ft_fail(err, "out of host memory reading %s", s->name);
    rc = rc || ft_st_read(&a->st, s, 0, raw, n * es, err);
    if (!rc)
        to_f32(s->dtype, raw, hf, n);
    if (!rc && hf != dst) {
        const long long cols = t->shape[1];
        for (long long r = 0; r < t->shape[0]; r++)
            memcpy(dst + ft_peft_neox_row(&a->layout.config, r) * cols, hf + r * cols,
                   (size_t)cols * sizeof *dst);
    }
    if (hf != dst)
        free(hf);
    free(raw);
    return rc ? -1 : 0;
}

int ft_peft_adapter_read_range(const ft_peft_adapter *a, const ft_unit_layout *u, size_t begin,
                               size_t end, float *dst, ft_error *err)
{
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo, hi;
        if (!ft_tensor_overlap(ti, begin, end, &lo, &hi))
            continue;
        /* adapter tensors are small (rank rows or columns): read whole, copy the part */
        float *whole = malloc(ti->numel * sizeof *whole);
        if (!whole)
            return ft_fail(err, "out of host memory reading %s", ti->name);
        int rc = ft_peft_adapter_read_tensor(a, ti, whole, err);
        if (!rc)
            memcpy(dst + (lo - begin), whole + (lo - ti->offset), (hi - lo) * sizeof *dst);
        free(whole);
        if (rc)
            return -1;
    }
    return 0;
}
