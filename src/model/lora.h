/* LoRA: trained low-rank adapters on a frozen model's linear projections (Hu et al.
 * 2021, as Hugging Face PEFT implements it).
 *
 * A target projection z = a W^T (+ b) becomes
 *     z = a W^T (+ b) + s (drop(a) A^T) B^T,     s = alpha / rank,
 * A [rank, in] and B [out, rank] trained, W and b frozen. With u = drop(a) A^T [N, rank]
 * kept from the forward, the backward is
 *     dB += s dz^T u,   du = s dz B,   dA += du^T drop(a),   da += dz W + du A.
 * A starts uniform in +-1/sqrt(in) (PEFT's kaiming_uniform_(a = sqrt(5))), B at zero,
 * so a fresh adapter leaves the model unchanged.
 *
 * Dropout (lora.dropout = p > 0; training only, as PEFT's nn.Dropout in train mode):
 * drop(a) = a * keep / (1 - p) elementwise, one mask per site (q and k, which share
 * their input, get independent masks, as PEFT's one dropout module per adapted
 * module), so da gets the dropped path's gradient drop(du A) (same mask). The mask is
 * the backend's counter-based one (backend/dropout_mask.h): element (token, column)
 * of site s in layer l is a function of (seed(run seed, l, s), the token's global
 * number, column). Tokens are numbered by their dataset sample's global sample
 * number (the trainer's position in the data order; ft_host_batch.first_sample) x
 * seq_len + position, so a sample's masks do not depend on which rank or micro-batch
 * trains it (N ranks give the masks of 1 rank), and each step draws new masks.
 * Memory: neither the mask nor drop(a) is kept. The forward writes drop(a) into one
 * scratch buffer [tokens, widest input of a targeted site], shared by the sites and
 * layers, right before u = drop(a) A^T; the backward recomputes it there from the
 * seed for dA (and reuses the buffer for du A before its dropout). Keeping drop(a)
 * per site and layer instead would cost, with the seven projections of Llama 2 70B
 * (intermediate 3.5 x hidden), 9.5 x hidden values per token and layer, 60 % more
 * than the block's own activations; even a bit mask (1.2 x hidden bytes) would be 60 %
 * of what activation checkpointing keeps (one bf16 block input). Recomputing costs two
 * elementwise passes per site and micro-batch, small beside the site's GEMMs.
 *
 * Sites. A site is one adapter (one A, one B). It feeds one of the block's
 * projections, except GPT-NeoX's fused query_key_value: one A over the attention
 * norm's output and one B whose rows are q's, then k's, then v's (ftmpi's order; the
 * converter permutes them to and from NeoX's per-head interleaving).
 *
 * Adapter units. The adapters of layer l are one unit (kind FT_UNIT_ADAPTER, layer l)
 * of their own layout (ft_lora_layout_build), the trainable model the engine shards,
 * checkpoints and optimizes; the base model is a second, frozen engine. A unit holds,
 * site by site in enum order, A then B of each targeted site; slot[FT_LORA_SLOT_A(s)]
 * and slot[FT_LORA_SLOT_B(s)] give their indices (-1: not targeted). Tensor names
 * follow ftmpi's Llama-style module names with PEFT's suffixes:
 *     model.layers.3.self_attn.q_proj.lora_A.weight   [rank, hidden]
 *     model.layers.3.self_attn.qkv_proj.lora_B.weight [q + 2 kv, rank]  (gpt_neox)
 *     model.layers.3.mlp.down_proj.lora_B.weight      [hidden, rank]
 */
#ifndef FT_MODEL_LORA_H
#define FT_MODEL_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/dropout_mask.h"
#include "model/layout.h"
#include "util/dtype.h"
#include "util/error.h"

typedef enum ft_lora_site {
    FT_LORA_Q, FT_LORA_K, FT_LORA_V, FT_LORA_O, FT_LORA_GATE, FT_LORA_UP, FT_LORA_DOWN,
    FT_LORA_QKV, /* gpt_neox's query_key_value */
    FT_LORA_N_SITES
} ft_lora_site;

#define FT_LORA_SLOT_A(site) (2 * (site))
#define FT_LORA_SLOT_B(site) (2 * (site) + 1)
_Static_assert(2 * FT_LORA_N_SITES <= FT_BLK_N_TENSORS, "adapter slots fit ft_unit_layout.slot");

typedef struct ft_lora_config {
    int rank;       /* 0: no LoRA */
    double alpha;   /* s = alpha / rank */
    double dropout; /* probability of zeroing an input element of A (0: none) */
    unsigned sites; /* bit (1u << site) per targeted site */
} ft_lora_config;

static inline bool ft_lora_enabled(const ft_lora_config *l) { return l && l->rank > 0; }
static inline bool ft_lora_has_site(const ft_lora_config *l, ft_lora_site s)
{
    return ft_lora_enabled(l) && (l->sites >> s & 1u);
}
static inline float ft_lora_scale(const ft_lora_config *l) { return (float)(l->alpha / l->rank); }

/* The family's Hugging Face module name of a site ("q_proj", "query_key_value",
 * "fc_in", ...), NULL where the family has no such site (gpt_neox has no separate q,
 * k, v; only gpt_neox has QKV; GELU families have no gate). */
const char *ft_lora_site_hf_name(const ft_model_config *c, ft_lora_site s);
/* The module path of a site within HF's layer l, e.g. "model.layers.3.self_attn.q_proj",
 * "gpt_neox.layers.3.attention.query_key_value", "transformer.h.3.mlp.fc_in"
 * (what PEFT's keys wrap: "base_model.model." + path + ".lora_A.weight"). */
void ft_lora_site_hf_path(const ft_model_config *c, ft_lora_site s, int layer, char *buf,
                          size_t size);
/* ftmpi's module path, e.g. "model.layers.3.self_attn.qkv_proj" (tensor names append
 * ".lora_A.weight" / ".lora_B.weight"). */
void ft_lora_site_path(ft_lora_site s, int layer, char *buf, size_t size);
/* Input and output widths of a site's projection (QKV: out = q + 2 kv). */
void ft_lora_site_dims(const ft_model_config *c, ft_lora_site s, long long *in, long long *out);

/* The widest input of lora's targeted sites (the dropout scratch's columns). */
long long ft_lora_widest_input(const ft_model_config *c, const ft_lora_config *lora);

/* Resolves HF target names (NULL-terminated; NULL: every projection of the family)
 * for the model's family into sites. Errors name the unknown target and list the
 * family's targets. rank >= 1 and
 * 0 <= dropout < 1 are the config schema's checks. */
int ft_lora_resolve(const ft_model_config *c, int rank, double alpha, double dropout,
                    char *const *targets, ft_lora_config *out, ft_error *err);
/* The bits (1u << site) of every site the family has: what targets left out mean. */
unsigned ft_lora_family_sites(const ft_model_config *c);
/* "q_proj,v_proj": the HF names of the sites of lora (checkpoints' /lora targets). */
void ft_lora_targets_string(const ft_model_config *model, const ft_lora_config *lora, char *buf,
                            size_t size);
/* "q_proj, k_proj, ..." of the family's sites, for messages and --help. */
void ft_lora_family_targets(const ft_model_config *c, char *buf, size_t size);

/* The adapter layout: num_hidden_layers units of kind FT_UNIT_ADAPTER (see above).
 * layout->config is the base model's. Free with ft_model_layout_free. */
int ft_lora_layout_build(ft_model_layout *layout, const ft_model_config *c,
                         const ft_lora_config *lora, ft_error *err);

/* dst[0 .. end-begin) = initial values of adapter unit elements [begin, end): A
 * uniform in +-1/sqrt(in), element i a function of (seed, tensor name, i) only; B 0.
 * (ft_model_init_range dispatches adapter units here.) */
void ft_lora_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                        float *dst);

/* The dropout of one layer's adapters in one micro-batch (see above). p = 0: none
 * (evaluation, decoding, lora.dropout = 0). */
typedef struct ft_lora_dropout {
    double p;
    uint64_t seed;  /* the run's seed */
    int layer;
    uint64_t row0;  /* global number of the micro-batch's first token */
} ft_lora_dropout;

/* The mask of site s for the tokens of d (backend/dropout_mask.h). */
ft_dropout_mask ft_lora_dropout_mask(const ft_lora_dropout *d, ft_lora_site s);

/* One block's adapters, bound to a unit's flat buffer (NULL where not targeted).
 * dropout: what the caller sets for a training pass (bind leaves it off). */
typedef struct ft_lora_params {
    float scale;
    int rank;
    const void *a[FT_LORA_N_SITES];
    const void *b[FT_LORA_N_SITES];
    ft_lora_dropout dropout;
} ft_lora_params;
typedef struct ft_lora_grads {
    void *a[FT_LORA_N_SITES];
    void *b[FT_LORA_N_SITES];
} ft_lora_grads;

void ft_lora_params_bind(const ft_unit_layout *u, const ft_lora_config *lora, ft_dtype dt,
                         const void *flat, ft_lora_params *p);
void ft_lora_grads_bind(const ft_unit_layout *u, ft_dtype gt, void *flat, ft_lora_grads *g);

#endif
