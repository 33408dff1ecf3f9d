/* Folding LoRA adapters into the frozen weights they adapt (model/lora.h):
 *     W += s B A,   s = alpha / rank,   A [rank, in], B [out, rank], W [out, in],
 * so that the merged projection a W^T equals a W^T + s (a A^T) B^T of the adapted one
 * (without dropout, as at inference). GPT-NeoX's fused site (FT_LORA_QKV) has one B
 * whose rows are q's, then k's, then v's: its row blocks update q_proj, k_proj and
 * v_proj. Biases are not adapted (PEFT's bias = "none").
 *
 * Used by `ftmpi-convert merge` (one block unit at a time, so a model never has to be
 * in memory at once) and by ftmpi-generate on an adapter checkpoint. Host, fp32. */
#ifndef FT_MODEL_LORA_MERGE_H
#define FT_MODEL_LORA_MERGE_H

#include "model/layout.h"
#include "model/lora.h"
#include "util/error.h"

/* base: the flat fp32 parameters of block unit base_u (ft_model_layout_build);
 * adapter: the flat fp32 parameters of adapter unit adapter_u (ft_lora_layout_build)
 * of the same layer. Every site the adapter unit holds is merged into base; the
 * scale is ft_lora_scale(lora). Fails, naming the tensors, when the unit kinds,
 * layers or shapes disagree (a base of another model). */
int ft_lora_merge_block(const ft_unit_layout *base_u, float *base,
                        const ft_unit_layout *adapter_u, const float *adapter,
                        const ft_lora_config *lora, ft_error *err);

#endif
