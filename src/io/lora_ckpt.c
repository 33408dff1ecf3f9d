/* A LoRA checkpoint's /lora group and adapter tensors (io/lora_ckpt.h). */
#include "io/lora_ckpt.h"

#include <stdio.h>
#include <string.h>

bool ft_lora_ckpt_is(const ft_h5file *f) { return H5Lexists(f->id, "/lora", H5P_DEFAULT) > 0; }

/* targets "q_proj,v_proj" -> resolved sites (the names checked against the family). */
static int resolve_targets(const char *path, const ft_model_config *c, int rank, double alpha,
                           double dropout, const char *csv, ft_lora_config *out, ft_error *err)
{
    char buf[512];
    char *names[FT_LORA_N_SITES + 2] = { 0 };
    int n = 0;
    snprintf(buf, sizeof buf, "%s", csv);
    for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (n == FT_LORA_N_SITES + 1)
            return ft_fail(err, "%s: /lora targets \"%s\" lists more modules than a model has",
                           path, csv);
        names[n++] = t;
    }
    if (ft_lora_resolve(c, rank, alpha, dropout, names, out, err))
        return ft_fail_context(err, "%s: /lora targets", path);
    return 0;
}

int ft_lora_ckpt_read(const ft_h5file *f, const ft_model_config *c, const char *group,
                      ft_lora_ckpt *out, ft_error *err)
{
    memset(out, 0, sizeof *out);
    hid_t g = H5Gopen2(f->id, "/lora", H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: no /lora group (not a LoRA checkpoint)", f->path);
    int64_t rank = 0;
    double alpha = 0, dropout = 0;
    int rc = ft_h5_attr_read_i64(f, g, "rank", &rank, err) ||
             ft_h5_attr_read_f64(f, g, "alpha", &alpha, err) ||
             ft_h5_attr_read_f64(f, g, "dropout", &dropout, err) ||
             ft_h5_attr_read_str(f, g, "targets", out->targets, sizeof out->targets, err) ||
             ft_h5_attr_read_str(f, g, "base_weights", out->base_weights,
                                 sizeof out->base_weights, err);
    if (!rc && ft_h5_attr_exists(g, "base_hash"))
        rc = ft_h5_attr_read_str(f, g, "base_hash", out->base_hash, sizeof out->base_hash, err);
    H5Gclose(g);
    if (rc)
        return ft_fail_context(err, "%s: /lora", f->path);
    if (rank < 1 || rank > 65536 || !(alpha > 0) || !(dropout >= 0 && dropout < 1))
        return ft_fail(err, "%s: /lora has rank %lld, alpha %g, dropout %g; a LoRA checkpoint "
                       "has rank >= 1, alpha > 0 and dropout in [0, 1)", f->path,
                       (long long)rank, alpha, dropout);
    if (resolve_targets(f->path, c, (int)rank, alpha, dropout, out->targets, &out->lora, err) ||
        ft_lora_layout_build(&out->layout, c, &out->lora, err))
        return -1;
    if (ft_weights_check_tensors(f, group, &out->layout, err)) {
        ft_lora_ckpt_free(out);
        return ft_fail_context(err, "%s (LoRA checkpoint, rank %d, targets %s)", f->path,
                               out->lora.rank, out->targets);
    }
    return 0;
}

void ft_lora_ckpt_free(ft_lora_ckpt *l) { ft_model_layout_free(&l->layout); }
