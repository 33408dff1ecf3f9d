/* Writing a PEFT LoRA adapter directory (io/peft_adapter.h). */
#include "io/peft_adapter.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/bf16.h"
#include "util/durable.h"
#include "util/output_file.h"
#include "util/path_join.h"

static int write_config(const char *dir, const ft_model_config *c, const ft_lora_config *lora,
                        const char *base_model, ft_error *err)
{
    json_t *root = json_object(), *targets = json_array();
    if (!root || !targets) {
        json_decref(root);
        json_decref(targets);
        return ft_fail(err, "out of host memory");
    }
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        if (ft_lora_has_site(lora, (ft_lora_site)s))
            json_array_append_new(targets, json_string(ft_lora_site_hf_name(c, (ft_lora_site)s)));
    /* what LoraConfig saves for a plain adapter; the rest PEFT fills with its defaults */
    json_object_set_new(root, "peft_type", json_string("LORA"));
    json_object_set_new(root, "task_type", json_string("CAUSAL_LM"));
    json_object_set_new(root, "base_model_name_or_path",
                        base_model && base_model[0] ? json_string(base_model) : json_null());
    json_object_set_new(root, "r", json_integer(lora->rank));
    json_object_set_new(root, "lora_alpha", json_real(lora->alpha));
    json_object_set_new(root, "lora_dropout", json_real(lora->dropout));
    json_object_set_new(root, "target_modules", targets);
    json_object_set_new(root, "bias", json_string("none"));
    json_object_set_new(root, "fan_in_fan_out", json_false());
    json_object_set_new(root, "use_rslora", json_false());
    json_object_set_new(root, "use_dora", json_false());
    json_object_set_new(root, "init_lora_weights", json_true());
    json_object_set_new(root, "inference_mode", json_true());
    json_object_set_new(root, "modules_to_save", json_null());
    char path[4200], tmp[4300];
    ft_path_join(path, sizeof path, dir, FT_PEFT_CONFIG_NAME);
    FILE *fp = NULL;
    int rc = ft_output_tmp_name(tmp, sizeof tmp, path, err) || ft_output_fopen_tmp(tmp, &fp, err);
    if (!rc) {
        bool bad = json_dumpf(root, fp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
                   fputc('\n', fp) == EOF;
        bad = fclose(fp) != 0 || bad;
        rc = bad ? ft_fail(err, "%s: write failed: %s", tmp, strerror(errno))
                 : ft_commit_file(tmp, path, err);
        if (rc)
            unlink(tmp);
    }
    json_decref(root);
    return rc ? -1 : 0;
}

/* GPT-NeoX's fused B in HF's row order (io/peft_adapter.h: ft_peft_neox_row). */
static void neox_rows_to_hf(const ft_model_config *c, const ft_tensor_info *t, const float *ours,
                            float *hf)
{
    const long long cols = t->shape[1];
    for (long long r = 0; r < t->shape[0]; r++)
        memcpy(hf + r * cols, ours + ft_peft_neox_row(c, r) * cols, (size_t)cols * sizeof *hf);
}

/* Streams the tensors into the open writer, one at a time. */
static int write_tensors(ft_st_writer *w, const ft_model_layout *l, ft_st_dtype dtype,
                         ft_peft_tensor_source src, void *ctx, size_t max_numel, ft_error *err)
{
    float *ours = malloc(max_numel * sizeof *ours), *hf = malloc(max_numel * sizeof *hf);
    uint16_t *bits = malloc(max_numel * sizeof *bits);
    int rc = ours && hf && bits ? 0 : ft_fail(err, "out of host memory");
    for (int i = 0; i < l->total_tensors && !rc; i++) {
        const ft_tensor_info *t = ft_model_layout_tensor_at(l, i);
        rc = src(ctx, t, ours, err);
        const float *out = ours;
        if (!rc && ft_peft_is_fused_b(t->name)) {
            neox_rows_to_hf(&l->config, t, ours, hf);
            out = hf;
        }
        if (!rc && dtype == FT_ST_BF16) {
            for (size_t k = 0; k < t->numel; k++)
                bits[k] = ft_f32_to_bf16(out[k]);
            rc = ft_st_writer_append(w, bits, t->numel * sizeof *bits, err);
        } else if (!rc) {
            rc = ft_st_writer_append(w, out, t->numel * sizeof *out, err);
        }
    }
    free(ours);
    free(hf);
    free(bits);
    return rc ? -1 : 0;
}

int ft_peft_adapter_write(const char *dir, const ft_model_layout *l, const ft_lora_config *lora,
                          const char *base_model, ft_st_dtype dtype, ft_peft_tensor_source src,
                          void *ctx, ft_error *err)
{
    if (dtype != FT_ST_F32 && dtype != FT_ST_BF16)
        return ft_fail(err, "internal: PEFT adapters are written in F32 or BF16");
    const int n = l->total_tensors;
    ft_st_spec *specs = calloc((size_t)n, sizeof *specs);
    char (*keys)[FT_TENSOR_NAME_MAX + 64] = calloc((size_t)n, sizeof *keys);
    size_t max_numel = 1;
    int rc = specs && keys ? 0 : ft_fail(err, "out of host memory");
    for (int i = 0; i < n && !rc; i++) {
        const ft_tensor_info *t = ft_model_layout_tensor_at(l, i);
        if (ft_peft_key(&l->config, t->name, keys[i], sizeof keys[i]))
            rc = ft_fail(err, "internal: no PEFT key for %s", t->name);
        specs[i] = (ft_st_spec){ .name = keys[i], .dtype = dtype, .ndim = 2,
                                 .shape = { (uint64_t)t->shape[0], (uint64_t)t->shape[1] } };
        max_numel = t->numel > max_numel ? t->numel : max_numel;
    }
    char path[4200], tmp[4300];
    ft_path_join(path, sizeof path, dir, FT_PEFT_WEIGHTS_NAME);
    static const char *const mk[] = { "format" }, *const mv[] = { "pt" };
    ft_st_writer w;
    rc = rc || ft_output_tmp_name(tmp, sizeof tmp, path, err) || ft_output_clear_tmp(tmp, err) ||
         ft_st_writer_open(&w, tmp, specs, n, mk, mv, 1, err);
    const bool opened = !rc;
    rc = rc || write_tensors(&w, l, dtype, src, ctx, max_numel, err);
    if (opened && rc) {
        ft_st_writer_abort(&w);
    } else if (opened) {
        rc = ft_st_writer_close(&w, err) || ft_commit_file(tmp, path, err);
        if (rc)
            unlink(tmp);
    }
    free(specs);
    free(keys);
    /* the config last: a directory with a config has its complete weights */
    return rc || write_config(dir, &l->config, lora, base_model, err) ? -1 : 0;
}
