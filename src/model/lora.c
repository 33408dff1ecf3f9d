/* LoRA sites, names, the adapter layout and initialisation (model/lora.h). */
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "util/rng.h"

/* ftmpi's module path of each site within a layer (Llama-style, as the base tensors). */
static const char *const site_path[FT_LORA_N_SITES] = {
    [FT_LORA_Q] = "self_attn.q_proj",    [FT_LORA_K] = "self_attn.k_proj",
    [FT_LORA_V] = "self_attn.v_proj",    [FT_LORA_O] = "self_attn.o_proj",
    [FT_LORA_GATE] = "mlp.gate_proj",    [FT_LORA_UP] = "mlp.up_proj",
    [FT_LORA_DOWN] = "mlp.down_proj",    [FT_LORA_QKV] = "self_attn.qkv_proj",
};

/* Hugging Face's module path of each site within a layer, per family (NULL: the family
 * has no such module), and the layer's own prefix. */
typedef struct hf_sites {
    const char *layer_fmt;
    const char *path[FT_LORA_N_SITES];
} hf_sites;

static const hf_sites llama_sites = {
    "model.layers.%d.",
    { [FT_LORA_Q] = "self_attn.q_proj", [FT_LORA_K] = "self_attn.k_proj",
      [FT_LORA_V] = "self_attn.v_proj", [FT_LORA_O] = "self_attn.o_proj",
      [FT_LORA_GATE] = "mlp.gate_proj", [FT_LORA_UP] = "mlp.up_proj",
      [FT_LORA_DOWN] = "mlp.down_proj" },
};
static const hf_sites neox_sites = {
    "gpt_neox.layers.%d.",
    { [FT_LORA_QKV] = "attention.query_key_value", [FT_LORA_O] = "attention.dense",
      [FT_LORA_UP] = "mlp.dense_h_to_4h", [FT_LORA_DOWN] = "mlp.dense_4h_to_h" },
};
static const hf_sites gptj_sites = {
    "transformer.h.%d.",
    { [FT_LORA_Q] = "attn.q_proj", [FT_LORA_K] = "attn.k_proj", [FT_LORA_V] = "attn.v_proj",
      [FT_LORA_O] = "attn.out_proj", [FT_LORA_UP] = "mlp.fc_in", [FT_LORA_DOWN] = "mlp.fc_out" },
};

static const hf_sites *sites_of(const ft_model_config *c)
{
    switch (c->family) {
    case FT_FAMILY_GPT_NEOX: return &neox_sites;
    case FT_FAMILY_GPTJ: return &gptj_sites;
    default: return &llama_sites;
    }
}

const char *ft_lora_site_hf_name(const ft_model_config *c, ft_lora_site s)
{
    if ((unsigned)s >= FT_LORA_N_SITES)
        return NULL;
    const char *p = sites_of(c)->path[s];
    if (!p)
        return NULL;
    const char *dot = strrchr(p, '.');
    return dot ? dot + 1 : p;
}

void ft_lora_site_hf_path(const ft_model_config *c, ft_lora_site s, int layer, char *buf,
                          size_t size)
{
    const hf_sites *t = sites_of(c);
    int n = snprintf(buf, size, t->layer_fmt, layer);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "%s", t->path[s] ? t->path[s] : "?");
}

void ft_lora_site_path(ft_lora_site s, int layer, char *buf, size_t size)
{
    snprintf(buf, size, "model.layers.%d.%s", layer, site_path[s]);
}

void ft_lora_site_dims(const ft_model_config *c, ft_lora_site s, long long *in, long long *out)
{
    const long long H = c->hidden_size, I = c->intermediate_size;
    const long long q = (long long)c->num_attention_heads * c->head_dim;
    const long long kv = (long long)c->num_key_value_heads * c->head_dim;
    switch (s) {
    case FT_LORA_Q: *in = H, *out = q; break;
    case FT_LORA_K:
    case FT_LORA_V: *in = H, *out = kv; break;
    case FT_LORA_O: *in = q, *out = H; break;
    case FT_LORA_GATE:
    case FT_LORA_UP: *in = H, *out = I; break;
    case FT_LORA_DOWN: *in = I, *out = H; break;
    case FT_LORA_QKV: *in = H, *out = q + 2 * kv; break;
    default: *in = *out = 0; break;
    }
}

unsigned ft_lora_family_sites(const ft_model_config *c)
{
    unsigned sites = 0;
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        if (ft_lora_site_hf_name(c, (ft_lora_site)s))
            sites |= 1u << s;
    return sites;
}

void ft_lora_family_targets(const ft_model_config *c, char *buf, size_t size)
{
    /* HF's order of a layer's modules: attention in, out; MLP in, out */
    static const ft_lora_site order[FT_LORA_N_SITES] = {
        FT_LORA_QKV, FT_LORA_Q, FT_LORA_K, FT_LORA_V, FT_LORA_O, FT_LORA_GATE, FT_LORA_UP,
        FT_LORA_DOWN,
    };
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < FT_LORA_N_SITES; i++) {
        const char *name = ft_lora_site_hf_name(c, order[i]);
        if (!name)
            continue;
        int w = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", name);
        if (w < 0 || (size_t)w >= size - n)
            return;
        n += (size_t)w;
    }
}

int ft_lora_resolve(const ft_model_config *c, int rank, double alpha, double dropout,
                    char *const *targets, ft_lora_config *out, ft_error *err)
{
    *out = (ft_lora_config){ .rank = rank, .alpha = alpha, .dropout = dropout };
    if (rank <= 0)
        return 0;
    const ft_family_info *fam = ft_family_info_of(c->family);
    char names[160];
    ft_lora_family_targets(c, names, sizeof names);
    if (!targets) { /* every projection of the family */
        out->sites = ft_lora_family_sites(c);
        return 0;
    }
    if (!targets[0])
        return ft_fail(err, "no targets: list some of the %s model's projections (%s)",
                       fam ? fam->name : "?", names);
    for (int i = 0; targets[i]; i++) {
        int found = -1;
        for (int s = 0; s < FT_LORA_N_SITES && found < 0; s++) {
            const char *name = ft_lora_site_hf_name(c, (ft_lora_site)s);
            if (name && strcmp(name, targets[i]) == 0)
                found = s;
        }
        if (found < 0)
            return ft_fail(err, "\"%s\" is not a projection of a %s model; its targets are %s",
                           targets[i], fam ? fam->name : "?", names);
        out->sites |= 1u << found;
    }
    return 0;
}

int ft_lora_layout_build(ft_model_layout *layout, const ft_model_config *c,
                         const ft_lora_config *lora, ft_error *err)
{
    memset(layout, 0, sizeof *layout);
    if (!ft_lora_enabled(lora) || !lora->sites)
        return ft_fail(err, "LoRA without a rank or targets has no adapter layout");
    if (ft_model_config_validate(c, err))
        return -1;
    layout->config = *c;
    const int L = c->num_hidden_layers;
    int n_sites = 0;
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        n_sites += ft_lora_has_site(lora, (ft_lora_site)s);
    layout->n_units = L;
    layout->units = calloc((size_t)L, sizeof *layout->units);
    if (!layout->units)
        return ft_fail(err, "out of host memory building the adapter layout");
    for (int l = 0; l < L; l++) {
        ft_unit_layout *u = &layout->units[l];
        if (ft_unit_layout_alloc(u, FT_UNIT_ADAPTER, l, 2 * n_sites, err)) {
            ft_model_layout_free(layout);
            return -1;
        }
        int next = 0;
        for (int s = 0; s < FT_LORA_N_SITES; s++) {
            if (!ft_lora_has_site(lora, (ft_lora_site)s))
                continue;
            long long in, outd;
            ft_lora_site_dims(c, (ft_lora_site)s, &in, &outd);
            char path[FT_TENSOR_NAME_MAX - 16], name[FT_TENSOR_NAME_MAX];
            ft_lora_site_path((ft_lora_site)s, l, path, sizeof path);
            snprintf(name, sizeof name, "%s.lora_A.weight", path);
            u->slot[FT_LORA_SLOT_A(s)] = next;
            ft_unit_layout_set_tensor(u, next++, name, 2, lora->rank, in);
            snprintf(name, sizeof name, "%s.lora_B.weight", path);
            u->slot[FT_LORA_SLOT_B(s)] = next;
            ft_unit_layout_set_tensor(u, next++, name, 2, outd, lora->rank);
        }
        ft_unit_layout_finish(u);
    }
    ft_model_layout_finish(layout);
    return 0;
}

static bool is_lora_b(const char *name)
{
    const size_t n = strlen(name), k = strlen(".lora_B.weight");
    return n >= k && strcmp(name + n - k, ".lora_B.weight") == 0;
}

void ft_lora_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                        float *dst)
{
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo, hi;
        if (!ft_tensor_overlap(ti, begin, end, &lo, &hi))
            continue;
        if (is_lora_b(ti->name)) {
            memset(dst + (lo - begin), 0, (hi - lo) * sizeof *dst);
            continue;
        }
        /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain sqrt(3 / in)
         * = 1 / sqrt(in), in = the row length of A */
        const double bound = 1.0 / sqrt((double)ti->shape[1]);
        const uint64_t stream = ft_rng_name_stream(ti->name);
        for (size_t i = lo; i < hi; i++)
            dst[i - begin] =
                (float)(bound * (2.0 * ft_rng_uniform(seed, stream, i - ti->offset) - 1.0));
    }
}

void ft_lora_params_bind(const ft_unit_layout *u, const ft_lora_config *lora, ft_dtype dt,
                         const void *flat, ft_lora_params *p)
{
    *p = (ft_lora_params){ .scale = ft_lora_scale(lora), .rank = lora->rank };
    const size_t es = ft_dtype_size(dt);
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        const int a = u->slot[FT_LORA_SLOT_A(s)], b = u->slot[FT_LORA_SLOT_B(s)];
        p->a[s] = a >= 0 ? (const char *)flat + u->tensors[a].offset * es : NULL;
        p->b[s] = b >= 0 ? (const char *)flat + u->tensors[b].offset * es : NULL;
    }
}

long long ft_lora_widest_input(const ft_model_config *c, const ft_lora_config *lora)
{
    long long widest = 0;
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        long long in, out;
        if (!ft_lora_has_site(lora, (ft_lora_site)s))
            continue;
        ft_lora_site_dims(c, (ft_lora_site)s, &in, &out);
        widest = in > widest ? in : widest;
    }
    return widest;
}

ft_dropout_mask ft_lora_dropout_mask(const ft_lora_dropout *d, ft_lora_site s)
{
    /* one seed per (run, layer, site); the tokens' global numbers select within it */
    const uint64_t seed = ft_rng_u64(d->seed, ft_rng_name_stream("lora_dropout"),
                                     (uint64_t)d->layer * FT_LORA_N_SITES + (uint64_t)s);
    return ft_dropout_mask_make(d->p, seed, d->row0);
}

void ft_lora_grads_bind(const ft_unit_layout *u, ft_dtype gt, void *flat, ft_lora_grads *g)
{
    const size_t es = ft_dtype_size(gt);
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        const int a = u->slot[FT_LORA_SLOT_A(s)], b = u->slot[FT_LORA_SLOT_B(s)];
        g->a[s] = a >= 0 ? (char *)flat + u->tensors[a].offset * es : NULL;
        g->b[s] = b >= 0 ? (char *)flat + u->tensors[b].offset * es : NULL;
    }
}

void ft_lora_targets_string(const ft_model_config *model, const ft_lora_config *lora, char *buf,
                            size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        const char *name = ft_lora_site_hf_name(model, (ft_lora_site)s);
        if (!name || !ft_lora_has_site(lora, (ft_lora_site)s))
            continue;
        const int w = snprintf(buf + n, size - n, "%s%s", n ? "," : "", name);
        if (w < 0 || (size_t)w >= size - n)
            return;
        n += (size_t)w;
    }
}
