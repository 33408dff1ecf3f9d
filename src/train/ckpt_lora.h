/* A LoRA checkpoint's /lora group (doc/formats.md "LoRA checkpoint"): what the adapters
 * in /model and /optim are (rank, alpha, dropout, targets) and which base they were
 * trained on. A LoRA checkpoint resumes only a LoRA run of the same adapters, and a
 * full checkpoint only a full run: each way round is one line, not a list of missing
 * tensors. */
#ifndef FT_TRAIN_CKPT_LORA_H
#define FT_TRAIN_CKPT_LORA_H

#include "config/run_config.h"
#include "io/h5file.h"
#include "model/lora.h"

/* Writes /lora for a LoRA run (lora enabled); nothing otherwise. */
/* base_hash: the base's content identity ("" or NULL: not written). */
int ft_ckpt_lora_write(const ft_h5file *f, const ft_run_config *cfg,
                       const ft_model_config *model, const ft_lora_config *lora,
                       const char *base_hash, ft_error *err);
/* Checks the file's /lora (or its absence) against this run's lora (NULL or rank 0:
 * a full run). */
int ft_ckpt_lora_check(const ft_h5file *f, const ft_model_config *model,
                       const ft_lora_config *lora, ft_error *err);

#endif
