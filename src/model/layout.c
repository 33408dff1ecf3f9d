#include "model/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ft_unit_layout_set_tensor(ft_unit_layout *u, int i, const char *name, int ndim, long long d0,
                       long long d1)
{
    ft_tensor_info *t = &u->tensors[i];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim == 2 ? d1 : 1;
    t->numel = (size_t)d0 * (size_t)(ndim == 2 ? d1 : 1);
}

/* Assigns offsets in order and the decay range (the 2-D tensors, which come first). */
void ft_unit_layout_finish(ft_unit_layout *u)
{
    size_t off = 0;
    u->decay_numel = 0;
    for (int i = 0; i < u->n_tensors; i++) {
        u->tensors[i].offset = off;
        off += u->tensors[i].numel;
        if (u->tensors[i].ndim == 2)
            u->decay_numel = off;
    }
    u->numel = off;
}

int ft_unit_layout_alloc(ft_unit_layout *u, ft_unit_kind kind, int layer, int n, ft_error *err)
{
    u->kind = kind;
    u->layer = layer;
    u->n_tensors = n;
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        u->slot[i] = -1;
    u->tensors = calloc((size_t)n, sizeof *u->tensors);
    if (!u->tensors)
        return ft_fail(err, "out of host memory building the parameter layout");
    return 0;
}

int ft_model_layout_build(ft_model_layout *layout, const ft_model_config *c, ft_error *err)
{
    memset(layout, 0, sizeof *layout);
    if (ft_model_config_validate(c, err))
        return -1;
    layout->config = *c;
    const long long H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    const long long q_out = (long long)c->num_attention_heads * c->head_dim;
    const long long kv_out = (long long)c->num_key_value_heads * c->head_dim;
    const int L = c->num_hidden_layers;

    layout->n_units = L + 2;
    layout->units = calloc((size_t)layout->n_units, sizeof *layout->units);
    if (!layout->units)
        return ft_fail(err, "out of host memory building the parameter layout");

    ft_unit_layout *emb = &layout->units[0];
    if (ft_unit_layout_alloc(emb, FT_UNIT_EMBED, -1, 1, err))
        goto fail;
    ft_unit_layout_set_tensor(emb, 0, "model.embed_tokens.weight", 2, V, H);
    ft_unit_layout_finish(emb);

    const ft_family_info *fam = ft_model_family_of(c);
    const bool ln = fam->layernorm;
    for (int l = 0; l < L; l++) {
        ft_unit_layout *u = &layout->units[ft_layout_block_unit(l)];
        if (ft_unit_layout_alloc(u, FT_UNIT_BLOCK, l, FT_BLK_N_TENSORS, err))
            goto fail;
        char n[FT_TENSOR_NAME_MAX];
        int next = 0;
        for (int i = 0; i < FT_BLK_N_TENSORS; i++)
            u->slot[i] = -1;
        /* 2-D tensors first, then 1-D (norms, biases): the decay range leads. The
         * Llama order of the first nine is what existing files hold. */
#define BLOCK_TENSOR(idx, suffix, nd, d0, d1)                                   \
    do {                                                                        \
        snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);                 \
        u->slot[idx] = next;                                                    \
        ft_unit_layout_set_tensor(u, next++, n, nd, d0, d1);                                   \
    } while (0)
        BLOCK_TENSOR(FT_BLK_Q, "self_attn.q_proj.weight", 2, q_out, H);
        BLOCK_TENSOR(FT_BLK_K, "self_attn.k_proj.weight", 2, kv_out, H);
        BLOCK_TENSOR(FT_BLK_V, "self_attn.v_proj.weight", 2, kv_out, H);
        BLOCK_TENSOR(FT_BLK_O, "self_attn.o_proj.weight", 2, H, q_out);
        if (!fam->gelu_mlp)
            BLOCK_TENSOR(FT_BLK_GATE, "mlp.gate_proj.weight", 2, I, H);
        BLOCK_TENSOR(FT_BLK_UP, "mlp.up_proj.weight", 2, I, H);
        BLOCK_TENSOR(FT_BLK_DOWN, "mlp.down_proj.weight", 2, H, I);
        BLOCK_TENSOR(FT_BLK_ATTN_NORM, "input_layernorm.weight", 1, H, 1);
        if (!fam->shared_norm)
            BLOCK_TENSOR(FT_BLK_MLP_NORM, "post_attention_layernorm.weight", 1, H, 1);
        if (ft_model_has_qkv_bias(c)) {
            BLOCK_TENSOR(FT_BLK_Q_BIAS, "self_attn.q_proj.bias", 1, q_out, 1);
            BLOCK_TENSOR(FT_BLK_K_BIAS, "self_attn.k_proj.bias", 1, kv_out, 1);
            BLOCK_TENSOR(FT_BLK_V_BIAS, "self_attn.v_proj.bias", 1, kv_out, 1);
        }
        if (fam->qk_norm) {
            BLOCK_TENSOR(FT_BLK_Q_NORM, "self_attn.q_norm.weight", 1, c->head_dim, 1);
            BLOCK_TENSOR(FT_BLK_K_NORM, "self_attn.k_norm.weight", 1, c->head_dim, 1);
        }
        if (ft_model_has_o_bias(c))
            BLOCK_TENSOR(FT_BLK_O_BIAS, "self_attn.o_proj.bias", 1, H, 1);
        if (fam->gelu_mlp) {
            BLOCK_TENSOR(FT_BLK_UP_BIAS, "mlp.up_proj.bias", 1, I, 1);
            BLOCK_TENSOR(FT_BLK_DOWN_BIAS, "mlp.down_proj.bias", 1, H, 1);
        }
        if (ln) {
            BLOCK_TENSOR(FT_BLK_ATTN_NORM_BIAS, "input_layernorm.bias", 1, H, 1);
            if (!fam->shared_norm)
                BLOCK_TENSOR(FT_BLK_MLP_NORM_BIAS, "post_attention_layernorm.bias", 1, H, 1);
        }
#undef BLOCK_TENSOR
        u->n_tensors = next;
        ft_unit_layout_finish(u);
    }

    ft_unit_layout *head = &layout->units[ft_layout_head_unit(layout)];
    const int tied = c->tie_word_embeddings;
    if (ft_unit_layout_alloc(head, FT_UNIT_HEAD, -1, FT_HEAD_N_TENSORS, err))
        goto fail;
    for (int i = 0; i < FT_BLK_N_TENSORS; i++)
        head->slot[i] = -1;
    int next = 0;
#define HEAD_TENSOR(idx, name, nd, d0, d1)                                      \
    do {                                                                        \
        head->slot[idx] = next;                                                 \
        ft_unit_layout_set_tensor(head, next++, name, nd, d0, d1);                             \
    } while (0)
    if (!tied)
        HEAD_TENSOR(FT_HEAD_LM, "lm_head.weight", 2, V, H);
    HEAD_TENSOR(FT_HEAD_NORM, "model.norm.weight", 1, H, 1);
    if (ln)
        HEAD_TENSOR(FT_HEAD_NORM_BIAS, "model.norm.bias", 1, H, 1);
    if (fam->lm_head_bias)
        HEAD_TENSOR(FT_HEAD_LM_BIAS, "lm_head.bias", 1, V, 1);
#undef HEAD_TENSOR
    head->n_tensors = next;
    ft_unit_layout_finish(head);

    ft_model_layout_finish(layout);
    return 0;
fail:
    ft_model_layout_free(layout);
    return -1;
}

void ft_model_layout_finish(ft_model_layout *layout)
{
    layout->total_tensors = 0;
    layout->total_numel = 0;
    for (int i = 0; i < layout->n_units; i++) {
        layout->units[i].first_tensor = layout->total_tensors;
        layout->total_tensors += layout->units[i].n_tensors;
        layout->total_numel += layout->units[i].numel;
    }
}

void ft_model_layout_free(ft_model_layout *layout)
{
    if (!layout->units)
        return;
    for (int i = 0; i < layout->n_units; i++)
        free(layout->units[i].tensors);
    free(layout->units);
    layout->units = NULL;
    layout->n_units = 0;
}

const ft_tensor_info *ft_model_layout_tensor_at(const ft_model_layout *layout, int index)
{
    for (int u = 0; u < layout->n_units; u++) {
        const ft_unit_layout *ul = &layout->units[u];
        if (index >= ul->first_tensor && index < ul->first_tensor + ul->n_tensors)
            return &ul->tensors[index - ul->first_tensor];
    }
    return NULL;
}

int ft_model_layout_find(const ft_model_layout *layout, const char *name, int *unit, int *tensor)
{
    for (int u = 0; u < layout->n_units; u++)
        for (int t = 0; t < layout->units[u].n_tensors; t++)
            if (strcmp(layout->units[u].tensors[t].name, name) == 0) {
                *unit = u;
                *tensor = t;
                return 0;
            }
    return -1;
}
