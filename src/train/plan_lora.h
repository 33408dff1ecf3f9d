/* LoRA in the memory planner (train/plan.h): the run's adapters, resolved as the
 * trainer resolves them, and the plan table's LoRA lines, which show the frozen base
 * apart from the adapters (the base's working parameters are most of a LoRA run's
 * memory; the adapters' gradients and optimizer state a small part). */
#ifndef FT_TRAIN_PLAN_LORA_H
#define FT_TRAIN_PLAN_LORA_H

#include <stdio.h>

#include "config/run_config.h"
#include "train/plan_parts.h"

/* *lora = cfg's LoRA for the model of layout (rank 0: none, *adapters untouched); with
 * LoRA *adapters = the adapter layout, which the caller frees (ft_model_layout_free).
 * An unknown target, and final_weights with LoRA, fail with config_lora.h's one lines
 * (FT_ERR_CONFIG), as the run does. */
int ft_plan_lora_open(const ft_run_config *cfg, const ft_model_layout *layout,
                      ft_lora_config *lora, ft_model_layout *adapters, ft_error *err);

/* The line that says what is trained: rank, alpha, targets, the adapters' parameters. */
void ft_plan_lora_print_trained(FILE *out, const ft_plan_models *pm);
/* The lines above a LoRA table's rows: what the columns hold, and the column header (the row's leading "stage offload ckpt |" and trailing "| device host |
 * fits" are those of the full fine-tuning table). */
void ft_plan_lora_print_header(FILE *out);
/* A row's middle columns, in GiB: base, gathered, adapters, activations. */
void ft_plan_lora_print_columns(FILE *out, const ft_plan_parts *p);
/* The exact bytes of the config's row, part by part. */
void ft_plan_lora_print_bytes(FILE *out, const ft_plan_parts *p);

#endif
