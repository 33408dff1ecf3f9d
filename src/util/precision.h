/* The precision policy: the storage type of every kind of tensor, resolved once from
 * the config (`precision`, `model.param_dtype`, `grad_reduce_dtype`; config_check.c
 * stores it in ft_run_config.numerics) and read as is by the trainer, the engine, the
 * planner and the model, so that no layer translates the config keys on its own
 * (doc/design.md, "Numerics"). */
#ifndef FT_UTIL_PRECISION_H
#define FT_UTIL_PRECISION_H

#include <stdbool.h>

#include "util/dtype.h"

typedef struct ft_precision {
    /* Storage of the parameters the model computes with, as the parameter source
     * hands them out, and of activations, their gradients and the residual stream:
     * the recipe (fp32, or bf16 mixed precision). */
    ft_dtype weights;
    ft_dtype activations;
    /* What the working parameters' values are: bf16 means the rounding of an fp32
     * master (model.param_dtype; held as fp32 values at stages 0-2 with fp32
     * weights, as bf16 bits at stage 3 and in checkpoints' /model). */
    ft_dtype params;
    ft_dtype master;     /* the optimizer's copy and its moments: fp32 */
    bool has_master;     /* a separate master exists (params bf16) */
    ft_dtype gradients;  /* parameter gradient accumulators: fp32 */
    ft_dtype reduction;  /* gradients on the wire (grad_reduce_dtype) */
} ft_precision;

/* The policy of a recipe: bf16 works on bf16 parameters (config_check refuses an
 * explicit fp32 param_dtype with it), fp32 keeps param_dtype as configured. */
static inline ft_precision ft_precision_resolve(ft_dtype recipe, ft_dtype param_dtype,
                                                ft_dtype grad_reduce)
{
    const ft_dtype params = recipe == FT_DTYPE_BF16 ? FT_DTYPE_BF16 : param_dtype;
    return (ft_precision){ .weights = recipe, .activations = recipe, .params = params,
                           .master = FT_DTYPE_F32, .has_master = params == FT_DTYPE_BF16,
                           .gradients = FT_DTYPE_F32, .reduction = grad_reduce };
}

#endif
