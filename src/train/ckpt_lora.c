/* The /lora group of LoRA checkpoints (ckpt_lora.h). */
#include "train/ckpt_lora.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int ft_ckpt_lora_write(const ft_h5file *f, const ft_run_config *cfg,
                       const ft_model_config *model, const ft_lora_config *lora,
                       const char *base_hash, ft_error *err)
{
    if (!ft_lora_enabled(lora))
        return 0;
    hid_t g = H5Gcreate2(f->id, "/lora", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: cannot create /lora", f->path);
    char targets[256];
    ft_lora_targets_string(model, lora, targets, sizeof targets);
    int rc = ft_h5_attr_write_i64(f, g, "rank", lora->rank, err) ||
             ft_h5_attr_write_f64(f, g, "alpha", lora->alpha, err) ||
             ft_h5_attr_write_f64(f, g, "dropout", lora->dropout, err) ||
             ft_h5_attr_write_str(f, g, "targets", targets, err) ||
             ft_h5_attr_write_str(f, g, "base_weights",
                                  cfg->model_weights ? cfg->model_weights : "", err) ||
             ft_h5_attr_write_i64(f, g, "base_seed", cfg->seed, err) ||
             (base_hash && base_hash[0] &&
              ft_h5_attr_write_str(f, g, "base_hash", base_hash, err));
    H5Gclose(g);
    return rc ? -1 : 0;
}

int ft_ckpt_lora_check(const ft_h5file *f, const ft_model_config *model,
                       const ft_lora_config *lora, ft_error *err)
{
    const bool has = H5Lexists(f->id, "/lora", H5P_DEFAULT) > 0;
    if (!has && !ft_lora_enabled(lora))
        return 0;
    if (!has)
        return ft_fail(err, "%s: a checkpoint of full fine-tuning, and this run trains LoRA "
                       "adapters: start the adapters from model.weights (resume = \"none\") or "
                       "remove the lora group to resume it", f->path);
    hid_t g = H5Gopen2(f->id, "/lora", H5P_DEFAULT);
    int64_t rank = 0;
    double alpha = 0;
    char targets[256] = "";
    int rc = g < 0 || ft_h5_attr_read_i64(f, g, "rank", &rank, err) ||
             ft_h5_attr_read_f64(f, g, "alpha", &alpha, err) ||
             ft_h5_attr_read_str(f, g, "targets", targets, sizeof targets, err);
    if (g >= 0)
        H5Gclose(g);
    if (rc)
        return ft_fail(err, "%s: /lora lacks rank, alpha or targets (damaged file?); use another "
                       "checkpoint", f->path);
    if (!ft_lora_enabled(lora))
        return ft_fail(err, "%s: a LoRA checkpoint (rank %lld adapters on %s) and this run has no "
                       "lora group: add lora = { rank = %lld; alpha = %g; targets = [...]; } to "
                       "resume it, or use ftmpi-convert merge to make a full model of it",
                       f->path, (long long)rank, targets, (long long)rank, alpha);
    char want[256];
    ft_lora_targets_string(model, lora, want, sizeof want);
    if (rank != lora->rank || strcmp(targets, want) != 0 || fabs(alpha - lora->alpha) > 0)
        return ft_fail(err, "%s: adapters of rank %lld, alpha %g on %s; this run's lora group "
                       "asks for rank %d, alpha %g on %s: set the same to resume it",
                       f->path, (long long)rank, alpha, targets, lora->rank, lora->alpha, want);
    return 0;
}
