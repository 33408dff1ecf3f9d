#include "train/plan_lora.h"

#include "config/config_lora.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

int ft_plan_lora_open(const ft_run_config *cfg, const ft_model_layout *layout,
                      ft_lora_config *lora, ft_model_layout *adapters, ft_error *err)
{
    if (ft_run_config_lora(cfg, &layout->config, lora, err) ||
        ft_run_config_lora_outputs(cfg, lora, err))
        return -1;
    if (!ft_lora_enabled(lora))
        return 0;
    return ft_lora_layout_build(adapters, &layout->config, lora, err);
}

void ft_plan_lora_print_trained(FILE *out, const ft_plan_models *pm)
{
    const ft_model_config *c = &pm->model->config;
    char targets[256];
    ft_lora_targets_string(c, pm->lora, targets, sizeof targets);
    const double trained = (double)pm->adapters->total_numel;
    fprintf(out,
            "LoRA rank %d, alpha %g on %s: %.3f B trained parameters (%zu, %.3f %% of the "
            "model's), the base frozen\n",
            pm->lora->rank, pm->lora->alpha, targets, trained / 1e9, pm->adapters->total_numel,
            100.0 * trained / (double)pm->model->total_numel);
}

void ft_plan_lora_print_header(FILE *out)
{
    fprintf(out, "  base: the frozen model's working parameters (stage 3: the rank's shard); "
                 "gathered: its stage-3 gather pool and load staging;\n"
                 "  adapters: their parameters, gradients, optimizer state and pools on the "
                 "device (offload moves their optimizer to the host)\n");
    fprintf(out, "  stage offload ckpt |     base gathered adapters activations |"
                 "   device     host | fits\n");
}

void ft_plan_lora_print_columns(FILE *out, const ft_plan_parts *p)
{
    fprintf(out, "%8.2f %8.2f %8.2f %11.2f", p->base.params / GIB,
            (p->base.gathered + p->base.scratch + p->base.grads + p->base.optimizer) / GIB,
            ft_plan_engine_device(&p->trained) / GIB, p->activations / GIB);
}

void ft_plan_lora_print_bytes(FILE *out, const ft_plan_parts *p)
{
    fprintf(out, "  (this config's parts: base %zu, gathered %zu, adapters %zu, activations %zu "
                 "bytes)\n",
            p->base.params, ft_plan_engine_device(&p->base) - p->base.params,
            ft_plan_engine_device(&p->trained), p->activations);
}
