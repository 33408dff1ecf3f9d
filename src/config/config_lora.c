/* ft_run_config_lora: the lora keys against the model's family (config_lora.h). */
#include <string.h>

#include "config/config_lora.h"

int ft_run_config_lora(const ft_run_config *cfg, const ft_model_config *model,
                       ft_lora_config *out, ft_error *err)
{
    memset(out, 0, sizeof *out);
    if (cfg->lora_rank == 0)
        return 0;
    /* lora.targets left out: every site the family has, by its own names */
    char *every[FT_LORA_N_SITES + 1];
    char *const *targets = cfg->lora_targets;
    if (!targets) {
        size_t n = 0;
        for (int s = 0; s < FT_LORA_N_SITES; s++) {
            const char *name = ft_lora_site_hf_name(model, (ft_lora_site)s);
            if (name)
                every[n++] = (char *)name; /* ft_lora_resolve only reads them */
        }
        every[n] = NULL;
        targets = every;
    }
    ft_error why;
    ft_error_clear(&why);
    if (ft_lora_resolve(model, cfg->lora_rank, cfg->lora_alpha, cfg->lora_dropout, targets, out,
                        &why) < 0) {
        ft_fail(err, "%s: %s", ft_run_config_where(cfg, "lora.targets"), why.msg);
        err->flags |= FT_ERR_CONFIG;
        return -1;
    }
    return 0;
}

int ft_run_config_lora_outputs(const ft_run_config *cfg, const ft_lora_config *lora,
                               ft_error *err)
{
    if (!ft_lora_enabled(lora) || !cfg->final_weights)
        return 0;
    ft_fail(err, "%s: a LoRA run trains adapters, not a model: drop final_weights and take the "
            "adapters from a checkpoint with `ftmpi-convert export --adapter` (PEFT) or "
            "`ftmpi-convert merge` (a full model)", ft_run_config_where(cfg, "final_weights"));
    err->flags |= FT_ERR_CONFIG;
    return -1;
}
