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

#include "model/model_config.h"
#include "util/error.h"

#define FT_TENSOR_NAME_MAX 96

/* FT_UNIT_ADAPTER: one layer's LoRA adapters, in the adapter layout (model/lora.h). */
typedef enum ft_unit_kind { FT_UNIT_EMBED, FT_UNIT_BLOCK, FT_UNIT_HEAD, FT_UNIT_ADAPTER } ft_unit_kind;

typedef struct ft_tensor_info {
    char name[FT_TENSOR_NAME_MAX]; /* HF name, e.g. model.layers.3.mlp.up_proj.weight */
    int ndim;                      /* 1 or 2 */
    long long shape[2];
    size_t offset;                 /* in elements, within the unit */
    size_t numel;
} ft_tensor_info;

/* The tensors a block can have. A family (model/family.h) has some of them; a unit
 * lists only those, 2-D weights first, and slot[] maps each to its index there.
 * Every family uses these Llama-style names (model.layers.N.self_attn.q_proj...);
 * ftmpi-convert maps GPT-NeoX's and GPT-J's own names to them:
 *   UP / DOWN       the MLP's first and second linear (SwiGLU's up and down, or
 *                   GELU's dense_h_to_4h / fc_in and dense_4h_to_h / fc_out)
 *   ATTN_NORM       the norm before attention (GPT-J: the one shared norm ln_1)
 *   MLP_NORM        the norm before the MLP (absent with a shared norm) */
enum ft_block_tensor {
    FT_BLK_Q, FT_BLK_K, FT_BLK_V, FT_BLK_O, FT_BLK_GATE, FT_BLK_UP, FT_BLK_DOWN,
    FT_BLK_ATTN_NORM, FT_BLK_MLP_NORM,
    FT_BLK_Q_BIAS, FT_BLK_K_BIAS, FT_BLK_V_BIAS, /* qwen2; gpt_neox with attention_bias */
    FT_BLK_Q_NORM, FT_BLK_K_NORM,                 /* qwen3 */
    FT_BLK_O_BIAS,                                /* gpt_neox with attention_bias */
    FT_BLK_UP_BIAS, FT_BLK_DOWN_BIAS,             /* GELU MLP */
    FT_BLK_ATTN_NORM_BIAS, FT_BLK_MLP_NORM_BIAS,  /* LayerNorm */
    FT_BLK_N_TENSORS
};
/* The head unit's tensors, through its slot[] like a block's: lm_head (absent when
 * tied), the final norm, and the biases of GPT-J's lm_head and of a LayerNorm. */
enum ft_head_tensor { FT_HEAD_LM, FT_HEAD_NORM, FT_HEAD_NORM_BIAS, FT_HEAD_LM_BIAS,
                      FT_HEAD_N_TENSORS };

typedef struct ft_unit_layout {
    ft_unit_kind kind;
    int layer;                 /* block index, -1 for embed/head */
    int n_tensors;
    ft_tensor_info *tensors;   /* owned */
    size_t numel;              /* sum of tensor numels */
    size_t decay_numel;        /* leading elements that get weight decay (2-D tensors) */
    int first_tensor;          /* index of tensors[0] in the model-wide tensor order */
    int slot[FT_BLK_N_TENSORS]; /* blocks: index in tensors[] of each ft_block_tensor, the
                                 * head: of each ft_head_tensor; -1 when the family has
                                 * none (unused for the embedding) */
} ft_unit_layout;

typedef struct ft_model_layout {
    ft_model_config config;
    int n_units;               /* num_hidden_layers + 2 */
    ft_unit_layout *units;     /* owned */
    size_t total_numel;
    int total_tensors;         /* over all units, in unit order */
} ft_model_layout;

/* The element offset of tensor `slot` of unit u (a block's ft_block_tensor or the
 * head's ft_head_tensor), or -1 when the unit has no such tensor. */
static inline long long ft_unit_slot_offset(const ft_unit_layout *u, int slot)
{
    return u->slot[slot] >= 0 ? (long long)u->tensors[u->slot[slot]].offset : -1;
}

/* [*lo, *hi): the part of unit elements [begin, end) that tensor t holds (unit
 * coordinates); false when it holds none of them. */
static inline bool ft_tensor_overlap(const ft_tensor_info *t, size_t begin, size_t end,
                                     size_t *lo, size_t *hi)
{
    *lo = begin > t->offset ? begin : t->offset;
    *hi = end < t->offset + t->numel ? end : t->offset + t->numel;
    return *lo < *hi;
}

int ft_model_layout_build(ft_model_layout *layout, const ft_model_config *config, ft_error *err);

/* Building blocks of a layout (also the adapter layout's, model/lora.c): a unit with
 * room for n tensors (slots -1), tensor i's name and shape, then the offsets and decay
 * range once its tensors are set (2-D first); the model-wide totals once all units are. */
int ft_unit_layout_alloc(ft_unit_layout *u, ft_unit_kind kind, int layer, int n, ft_error *err);
void ft_unit_layout_set_tensor(ft_unit_layout *u, int i, const char *name, int ndim, long long d0,
                               long long d1);
void ft_unit_layout_finish(ft_unit_layout *u);
void ft_model_layout_finish(ft_model_layout *layout);
void ft_model_layout_free(ft_model_layout *layout);

static inline int ft_layout_block_unit(int layer) { return 1 + layer; }
static inline int ft_layout_head_unit(const ft_model_layout *l) { return l->n_units - 1; }

/* The tensor at a model-wide index (0 .. total_tensors-1, units in order). */
const ft_tensor_info *ft_model_layout_tensor_at(const ft_model_layout *layout, int index);

/* Finds a tensor by HF name; returns 0 and sets *unit / *tensor, or -1. */
int ft_model_layout_find(const ft_model_layout *layout, const char *name, int *unit, int *tensor);

#endif
