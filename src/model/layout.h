/* Parameter layout: the model cut into flat units.
 *
 * Unit 0 is the token embedding, units 1..L are the transformer blocks, unit L+1 is
 * the head (final norm and, when untied, the output projection). Each unit's
 * parameters live in one flat buffer; a tensor is a contiguous [offset, offset+numel)
 * range of it, named as in Hugging Face. This is what the sharding engine splits
 * between ranks and what checkpoints address by name.
 *
 * Within a unit the 2-D weights come first and the 1-D norm weights last, so weight
 * decay (2-D only) applies to one leading range of every unit.
 */
#ifndef FT_MODEL_LAYOUT_H
#define FT_MODEL_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "model/llama_config.h"
#include "util/error.h"

#define FT_TENSOR_NAME_MAX 96

typedef enum ft_unit_kind { FT_UNIT_EMBED, FT_UNIT_BLOCK, FT_UNIT_HEAD } ft_unit_kind;

typedef struct ft_tensor_info {
    char name[FT_TENSOR_NAME_MAX]; /* HF name, e.g. model.layers.3.mlp.up_proj.weight */
    int ndim;                      /* 1 or 2 */
    long long shape[2];
    size_t offset;                 /* in elements, within the unit */
    size_t numel;
} ft_tensor_info;

/* The tensors a block can have, in their order inside a block unit. A family
 * (model/family.h) has the first nine and some of the rest; a unit lists only the
 * ones its family has, in this order, and slot[] maps each to its index there. */
enum ft_block_tensor {
    FT_BLK_Q, FT_BLK_K, FT_BLK_V, FT_BLK_O, FT_BLK_GATE, FT_BLK_UP, FT_BLK_DOWN,
    FT_BLK_ATTN_NORM, FT_BLK_MLP_NORM,
    FT_BLK_Q_BIAS, FT_BLK_K_BIAS, FT_BLK_V_BIAS, /* qwen2 */
    FT_BLK_Q_NORM, FT_BLK_K_NORM,                 /* qwen3 */
    FT_BLK_N_TENSORS
};
/* Fixed tensor order inside the head unit (FT_HEAD_LM absent when tied). */
enum ft_head_tensor { FT_HEAD_LM = 0 };

typedef struct ft_unit_layout {
    ft_unit_kind kind;
    int layer;                 /* block index, -1 for embed/head */
    int n_tensors;
    ft_tensor_info *tensors;   /* owned */
    size_t numel;              /* sum of tensor numels */
    size_t decay_numel;        /* leading elements that get weight decay (2-D tensors) */
    int first_tensor;          /* index of tensors[0] in the model-wide tensor order */
    int slot[FT_BLK_N_TENSORS]; /* blocks: index in tensors[] of each ft_block_tensor, -1
                                 * when the family has none (unused for embed/head) */
} ft_unit_layout;

typedef struct ft_model_layout {
    ft_model_config config;
    int n_units;               /* num_hidden_layers + 2 */
    ft_unit_layout *units;     /* owned */
    size_t total_numel;
    int total_tensors;         /* over all units, in unit order */
} ft_model_layout;

int ft_model_layout_build(ft_model_layout *layout, const ft_model_config *config, ft_error *err);
void ft_model_layout_free(ft_model_layout *layout);

static inline int ft_layout_block_unit(int layer) { return 1 + layer; }
static inline int ft_layout_head_unit(const ft_model_layout *l) { return l->n_units - 1; }

/* The tensor at a model-wide index (0 .. total_tensors-1, units in order). */
const ft_tensor_info *ft_model_layout_tensor_at(const ft_model_layout *layout, int index);

/* Finds a tensor by HF name; returns 0 and sets *unit / *tensor, or -1. */
int ft_model_layout_find(const ft_model_layout *layout, const char *name, int *unit, int *tensor);

#endif
