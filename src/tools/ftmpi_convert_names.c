/* The Hugging Face tensors of a model and where their elements are in the ftmpi
 * layout (ftmpi_convert.h: cv_hf_tensor).
 *
 * ftmpi names every family's tensors the Llama way (model/layout.h); Llama, Qwen2,
 * Qwen3 and Mistral checkpoints use those names too. GPT-NeoX and GPT-J rename
 * them (prefix rewrites, one hf_tensor_names row per family below), and GPT-NeoX stores q, k and v as one
 * fused query_key_value tensor [3 * heads * head_dim, hidden] whose rows go head
 * by head, each head's q rows, then its k rows, then its v rows (its bias alike).
 * Such a tensor has three parts; its element e lies in head (e / seg) / 3, part
 * (e / seg) % 3, with seg = head_dim x columns the elements of one head's rows of
 * one part, and is element head * seg + e % seg of that part's layout tensor.
 * Runs of seg elements are contiguous on both sides, which is what lets import and
 * export stream a fused tensor with the same fixed buffer as any other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ftmpi_convert.h"

typedef struct rename_rule {
    const char *ours, *theirs; /* prefix after "model.layers.N." (per layer) or of the name */
} rename_rule;

/* GPT-NeoX: GPTNeoXForCausalLM's names; q/k/v are fused (handled separately). */
static const rename_rule neox_top[] = {
    { "model.embed_tokens.", "gpt_neox.embed_in." },
    { "model.norm.", "gpt_neox.final_layer_norm." },
    { "lm_head.", "embed_out." },
    { NULL, NULL },
};
static const rename_rule neox_layer[] = {
    { "input_layernorm.", "input_layernorm." },
    { "post_attention_layernorm.", "post_attention_layernorm." },
    { "self_attn.o_proj.", "attention.dense." },
    { "mlp.up_proj.", "mlp.dense_h_to_4h." },
    { "mlp.down_proj.", "mlp.dense_4h_to_h." },
    { NULL, NULL },
};
/* GPT-J: GPTJForCausalLM's names. */
static const rename_rule gptj_top[] = {
    { "model.embed_tokens.", "transformer.wte." },
    { "model.norm.", "transformer.ln_f." },
    { "lm_head.", "lm_head." },
    { NULL, NULL },
};
static const rename_rule gptj_layer[] = {
    { "input_layernorm.", "ln_1." },
    { "self_attn.q_proj.", "attn.q_proj." },
    { "self_attn.k_proj.", "attn.k_proj." },
    { "self_attn.v_proj.", "attn.v_proj." },
    { "self_attn.o_proj.", "attn.out_proj." },
    { "mlp.up_proj.", "mlp.fc_in." },
    { "mlp.down_proj.", "mlp.fc_out." },
    { NULL, NULL },
};

/* A family's Hugging Face tensor names, in one place: the families whose names are
 * ftmpi's own (Llama, Qwen2, Qwen3, Mistral) have an empty row. */
typedef struct hf_tensor_names {
    const rename_rule *top;   /* names outside the layers; NULL: the layout's names */
    const rename_rule *layer; /* names inside layer N, after layer_prefix "N." */
    const char *layer_prefix;
    const char *fused_qkv;    /* q, k, v (and their biases) as one tensor of this name
                               * after layer_prefix "N." ("weight"/"bias" appended) */
    const char *lm_head_alias; /* another name a checkpoint may give lm_head.weight */
} hf_tensor_names;

static const hf_tensor_names tensor_names[FT_FAMILY_COUNT] = {
    [FT_FAMILY_GPT_NEOX] = { neox_top, neox_layer, "gpt_neox.layers.",
                             "attention.query_key_value.",
                             /* transformers 5 saves embed_out as lm_head (and loads either) */
                             "embed_out.weight" },
    [FT_FAMILY_GPTJ] = { gptj_top, gptj_layer, "transformer.h.", NULL, NULL },
};

static const hf_tensor_names *names_of(const ft_model_config *c)
{
    return &tensor_names[c->family];
}

static bool apply_rules(const rename_rule *rules, const char *name, const char *prefix,
                        char *out, size_t len)
{
    for (const rename_rule *r = rules; r->ours; r++) {
        size_t n = strlen(r->ours);
        if (strncmp(name, r->ours, n) == 0) {
            snprintf(out, len, "%s%s%s", prefix, r->theirs, name + n);
            return true;
        }
    }
    return false;
}

/* The HF name of layout tensor `ours` (not a fused part). */
static int hf_name(const ft_model_config *c, const char *ours, char *out, size_t len,
                   ft_error *err)
{
    const hf_tensor_names *hn = names_of(c);
    if (!hn->top) {
        snprintf(out, len, "%s", ours);
        return 0;
    }
    int l, skip = 0;
    if (sscanf(ours, "model.layers.%d.%n", &l, &skip) == 1 && skip > 0) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s%d.", hn->layer_prefix, l);
        if (apply_rules(hn->layer, ours + skip, prefix, out, len))
            return 0;
    } else if (apply_rules(hn->top, ours, "", out, len)) {
        return 0;
    }
    return ft_fail(err, "internal: no %s name for tensor '%s'", ft_model_family_of(c)->name, ours);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int cv_hf_tensors(const ft_model_layout *l, cv_hf_tensor **out, int *n, ft_error *err)
{
    const ft_model_config *c = &l->config;
    const hf_tensor_names *hn = names_of(c);
    const bool fuse = hn->fused_qkv != NULL;
    *out = calloc((size_t)l->total_tensors, sizeof **out);
    *n = 0;
    if (!*out)
        return ft_fail(err, "out of host memory");
    int index = 0;
    for (int u = 0; u < l->n_units; u++) {
        const ft_unit_layout *ul = &l->units[u];
        for (int t = 0; t < ul->n_tensors; t++, index++) {
            const ft_tensor_info *ti = &ul->tensors[t];
            cv_hf_tensor *h = &(*out)[*n];
            h->ndim = ti->ndim;
            h->shape[0] = (uint64_t)ti->shape[0];
            h->shape[1] = (uint64_t)ti->shape[1];
            h->numel = ti->numel;
            h->n_parts = 1;
            h->part[0] = index;
            h->seg = ti->numel;
            if (fuse && ul->kind == FT_UNIT_BLOCK &&
                (t == ul->slot[FT_BLK_K] || t == ul->slot[FT_BLK_V] ||
                 t == ul->slot[FT_BLK_K_BIAS] || t == ul->slot[FT_BLK_V_BIAS]))
                continue; /* parts of the fused tensor made at q */
            if (fuse && ul->kind == FT_UNIT_BLOCK &&
                (t == ul->slot[FT_BLK_Q] || t == ul->slot[FT_BLK_Q_BIAS])) {
                const bool bias = t == ul->slot[FT_BLK_Q_BIAS];
                const int k = ul->slot[bias ? FT_BLK_K_BIAS : FT_BLK_K];
                const int v = ul->slot[bias ? FT_BLK_V_BIAS : FT_BLK_V];
                const uint64_t cols = ti->ndim == 2 ? (uint64_t)ti->shape[1] : 1;
                h->n_parts = 3;
                h->part[1] = index - t + k;
                h->part[2] = index - t + v;
                h->shape[0] *= 3;
                h->numel *= 3;
                h->seg = (uint64_t)c->head_dim * cols;
                snprintf(h->name, sizeof h->name, "%s%d.%s%s", hn->layer_prefix, ul->layer,
                         hn->fused_qkv, bias ? "bias" : "weight");
            } else if (hf_name(c, ti->name, h->name, sizeof h->name, err)) {
                free(*out);
                *out = NULL;
                return -1;
            }
            (*n)++;
        }
    }
    return 0;
}

void cv_hf_locate(const cv_hf_tensor *t, uint64_t e, int *part, uint64_t *off, uint64_t *run)
{
    if (t->n_parts == 1) {
        *part = 0;
        *off = e;
        *run = t->numel - e;
        return;
    }
    const uint64_t block = e / t->seg, in = e % t->seg;
    *part = (int)(block % 3);
    *off = (block / 3) * t->seg + in;
    *run = t->seg - in;
}

const char *cv_hf_alias(const ft_model_config *c, const char *name)
{
    const char *alias = names_of(c)->lm_head_alias;
    return alias && strcmp(name, "lm_head.weight") == 0 ? alias : NULL;
}

bool cv_hf_ignored(const char *name)
{
    /* buffers some checkpoints carry, never weights: RoPE's inverse frequencies, and
     * the causal-mask buffers of old GPT-NeoX and GPT-J saves */
    return ends_with(name, ".rotary_emb.inv_freq") || ends_with(name, ".attention.bias") ||
           ends_with(name, ".attention.masked_bias") || ends_with(name, ".attn.bias") ||
           ends_with(name, ".attn.masked_bias");
}
