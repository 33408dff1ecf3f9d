/* Sample generations during training (eval_prompts): at each evaluation every prompt is
 * completed greedily with the parameters being trained, by the generation decoder
 * (generate/decoder.h) reading them through the engine's parameter source, and rank 0
 * writes the completions to the log and the metrics file.
 *
 * Precision: the decoder runs in the dtype the source hands the units out in (the run's
 * numerics.weights): fp32, or with precision = "bf16" the working bf16 parameters (the
 * fp32 master's rounding), so a bf16 run's samples are those of ftmpi-generate --params
 * model on its checkpoint.
 *
 * Collective: every rank runs the same greedy decode (identical parameters give
 * identical argmaxes), so that ZeRO-3's gathers of each unit are matched on all ranks.
 * Where the completions go (the log, the metrics file) is the caller's sink: this module
 * knows nothing of training's reports.
 *
 * Ownership: ft_eval_samples_create returns an object freed by ft_eval_samples_free; the
 * config's prompts are borrowed. */
#ifndef FT_GENERATE_EVAL_SAMPLES_H
#define FT_GENERATE_EVAL_SAMPLES_H

#include <stdio.h>

#include "backend/backend.h"
#include "config/run_config.h"
#include "model/layout.h"
#include "model/model.h"
#include "util/error.h"

typedef struct ft_eval_samples ft_eval_samples;

/* Receives completion `index` (0-based) of `count` after `step` steps; text is not
 * NUL-terminated (len bytes); stop names why generation ended. */
typedef void (*ft_sample_sink)(void *ctx, long step, int index, int count, const char *prompt,
                               const char *text, size_t len, const char *stop);

/* Loads eval_tokenizer (or byte tokens), parses eval_template and encodes every prompt
 * against the model's shape. Errors name the key at fault. */
int ft_eval_samples_create(ft_eval_samples **out, const ft_run_config *cfg,
                           const ft_model_config *model, ft_error *err);
void ft_eval_samples_free(ft_eval_samples *s);

/* Completes every prompt after `step` steps, handing each completion to sink (NULL:
 * none, e.g. on ranks other than 0). */
/* adapters: a LoRA run's (NULL: none), applied on top of src's model. */
int ft_eval_samples_run(ft_eval_samples *s, long step, const ft_model_layout *layout,
                        ft_backend *be, const ft_param_source *src,
                        const ft_lora_adapters *adapters, ft_sample_sink sink, void *sink_ctx,
                        ft_error *err);

#endif
