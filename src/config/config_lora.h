/* The run config's lora keys resolved against the model (model/lora.h).
 *
 * The config reader checks what it can alone (ranges, an empty or repeated target,
 * model.adapter without LoRA); which target names exist depends on the model's
 * family, known at start-up (model.weights holds it), so this resolution runs then. */
#ifndef FT_CONFIG_CONFIG_LORA_H
#define FT_CONFIG_CONFIG_LORA_H

#include "config/run_config.h"
#include "model/lora.h"
#include "model/model_config.h"
#include "util/error.h"

/* out = the LoRA of this run for `model`: rank 0 (LoRA off) without a lora group, else
 * lora.rank, lora.alpha, lora.dropout and the sites of lora.targets (every site of the
 * family when the key is left out). An unknown target fails with one line that starts
 * with where lora.targets came from ("f.cfg:14: lora.targets: ..." or "command line:
 * lora.targets=[...]: ..."), marked FT_ERR_CONFIG (exit 2). It depends on cfg and model
 * only, so ranks that call it alike fail alike: the caller adds FT_ERR_SHARED where
 * every rank does. */
int ft_run_config_lora(const ft_run_config *cfg, const ft_model_config *model,
                       ft_lora_config *out, ft_error *err);

/* The outputs a run with LoRA `lora` cannot write: final_weights (the trained model) is
 * refused, since such a run trains adapters; the one line says where the key came from
 * and how to get the adapters or a merged model instead, marked FT_ERR_CONFIG (exit 2).
 * The trainer and --plan both call it, so a plan refuses what the run would. */
int ft_run_config_lora_outputs(const ft_run_config *cfg, const ft_lora_config *lora,
                               ft_error *err);

#endif
