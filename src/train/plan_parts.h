/* One rank's memory, part by part, for the memory planner (`ftmpi --plan`) and the
 * start-up check of the host's memory: the dry runs of exactly the engines and the
 * model a run creates (train/trainer.c):
 *   full fine-tuning: one trainable engine over the model's layout;
 *   LoRA:             a frozen engine over the model's layout (the base) and a trainable
 *                     engine over the adapter layout, with the model's activations
 *                     counted with the adapters attached (their u and du buffers). */
#ifndef FT_TRAIN_PLAN_PARTS_H
#define FT_TRAIN_PLAN_PARTS_H

#include <stddef.h>

#include "model/layout.h"
#include "model/lora.h"
#include "model/model.h"
#include "shard/engine.h"

/* What a run trains. Borrowed pointers; they must outlive every call below. */
typedef struct ft_plan_models {
    const ft_model_layout *model;    /* the model's layout */
    const ft_lora_config *lora;      /* NULL or rank 0: every weight is trained */
    const ft_model_layout *adapters; /* LoRA: the adapter layout (ft_lora_layout_build) */
} ft_plan_models;

static inline bool ft_plan_models_lora(const ft_plan_models *pm)
{
    return ft_lora_enabled(pm->lora);
}

typedef struct ft_plan_parts {
    ft_engine_memory trained; /* the trained engine: the model's, or with LoRA the adapters' */
    ft_engine_memory base;    /* LoRA: the frozen base engine; all zero otherwise */
    size_t activations;       /* the model's activation and scratch buffers */
} ft_plan_parts;

/* The parts of rank 0 of P ranks for the run's engine options eo (the trained engine's;
 * the base takes them with frozen = true, as the trainer does) and model options mo
 * (lora and adapter_layout are set here from pm). */
int ft_plan_parts_estimate(const ft_plan_models *pm, const ft_engine_options *eo,
                           const ft_model_options *mo, int P, ft_plan_parts *out, ft_error *err);

/* Device bytes of one engine's memory (everything but host). */
size_t ft_plan_engine_device(const ft_engine_memory *m);
/* Totals: device (both engines and the activations) and host (offload). */
size_t ft_plan_parts_device(const ft_plan_parts *p);
size_t ft_plan_parts_host(const ft_plan_parts *p);

#endif
