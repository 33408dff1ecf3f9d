/* The model's scalar fields, one row each: how weights files and checkpoints name
 * them (the /config attribute), their type, the value a file without the attribute
 * means, whether a file must have it, whether it is written only when it differs
 * from that value (so files of the Llama shape keep their bytes), and whether a
 * checkpoint must match the run's value to be resumed. Readers and writers walk this
 * table instead of listing fields, and so does the config schema: adding a field is
 * one row here plus its use (doc/design.md, "Adding a model field"). The rope scaling block, a struct of its
 * own with a kind string, stays with its readers. */
#ifndef FT_MODEL_MODEL_FIELDS_H
#define FT_MODEL_MODEL_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model_config.h"

typedef enum ft_model_field_type {
    FT_FIELD_INT,    /* int; files store an integer in [-1, INT_MAX] */
    FT_FIELD_BOOL,   /* bool; files store the integer 0 or 1 */
    FT_FIELD_DOUBLE, /* double */
    FT_FIELD_FAMILY, /* ft_model_family; files store the family's name (family.h) */
} ft_model_field_type;

typedef struct ft_model_field {
    const char *attr;          /* the /config attribute */
    ft_model_field_type type;
    size_t offset;             /* in ft_model_config */
    bool required;             /* a file without it is refused */
    bool omit_when_absent;     /* written only when the value is not `absent` */
    bool shape;                /* a checkpoint of another value cannot be resumed */
    double absent;             /* the value a file without the attribute means */
    /* Its key in Hugging Face's config.json, per family (index: ft_model_family);
     * NULL where that family's config.json has no such key. io/hf_config_read.c and
     * io/hf_config_write.c read and write the key from here; what its value means
     * there beyond "the field's value" (rotary_pct = rotary_dim / head_dim,
     * hidden_act's GELU name) is that family's adapter row in io/hf_config_family.c. */
    const char *hf_key[FT_FAMILY_COUNT];
} ft_model_field;

/* config.json keys for the table's hf column, in family order (family.h): one key for
 * every family, or Llama's key (llama, qwen2, qwen3, mistral), GPT-NeoX's and GPT-J's. */
#define FT_HF_SAME(key) (key, key, key, key, key, key)
#define FT_HF_KEYS(llama, gpt_neox, gptj) (llama, llama, llama, llama, gpt_neox, gptj)

/* The table: X(field of ft_model_config, /config attribute, type, required,
 * omit_when_absent, shape, absent, config.json keys per family (hf_key), config key's kind, (its flags, range, default and
 * help)). Row order is the attribute order of weights files (keep it: files written
 * before and after would differ in bytes) and the order of the model.* keys in
 * --help-config. Expanded into ft_model_fields() (model_fields.c) and into the config
 * schema's keys "model.<field>" (config/config_schema.c, where the kind macros, the
 * flags and family_names are defined). */
#define FT_MODEL_FIELD_TABLE(X)  \
    X(vocab_size, "vocab_size", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_SAME("vocab_size"), \
      INT, (SHAPE_REQ, 1, INT_MAX, 0, "vocabulary size (rows of the embedding)")) \
    X(hidden_size, "hidden_size", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("hidden_size", "hidden_size", "n_embd"), \
      INT, (SHAPE_REQ, 1, INT_MAX, 0, "model width")) \
    X(intermediate_size, "intermediate_size", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("intermediate_size", "intermediate_size", "n_inner"), \
      INT, (SHAPE_REQ, 1, INT_MAX, 0, "MLP hidden width (SwiGLU; GELU for gpt_neox, gptj)")) \
    X(num_hidden_layers, "num_hidden_layers", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("num_hidden_layers", "num_hidden_layers", "n_layer"), \
      INT, (SHAPE_REQ, 1, INT_MAX, 0, "number of transformer blocks")) \
    X(num_attention_heads, "num_attention_heads", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("num_attention_heads", "num_attention_heads", "n_head"), \
      INT, (SHAPE_REQ, 1, INT_MAX, 0, "query heads")) \
    X(num_key_value_heads, "num_key_value_heads", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("num_key_value_heads", NULL, NULL), \
      INT_DERIVED, (SHAPE, 1, INT_MAX, "num_attention_heads", "key/value heads (grouped-query attention); must divide num_attention_heads")) \
    X(head_dim, "head_dim", FT_FIELD_INT, true, false, true, 0,  \
      FT_HF_KEYS("head_dim", NULL, NULL), \
      INT_DERIVED, (SHAPE, 1, INT_MAX, "hidden_size / num_attention_heads", "width of one head; must be even (RoPE)")) \
    X(max_position_embeddings, "max_position_embeddings", FT_FIELD_INT, true, false, false, 0,  \
      FT_HF_KEYS("max_position_embeddings", "max_position_embeddings", "n_positions"), \
      INT, (SHAPE, 1, INT_MAX, 2048, "longest sequence the model is meant for")) \
    X(tie_word_embeddings, "tie_word_embeddings", FT_FIELD_BOOL, true, false, true, 0,  \
      FT_HF_SAME("tie_word_embeddings"), \
      BOOL, (SHAPE, 0, "share the embedding matrix with the output head")) \
    X(bos_token_id, "bos_token_id", FT_FIELD_INT, false, false, false, -1,  \
      FT_HF_SAME("bos_token_id"), \
      INT, (SHAPE, -1, INT_MAX, -1, "beginning-of-sequence token; -1 unknown")) \
    X(eos_token_id, "eos_token_id", FT_FIELD_INT, false, false, false, -1,  \
      FT_HF_SAME("eos_token_id"), \
      INT, (SHAPE, -1, INT_MAX, -1, "end-of-sequence token; -1 unknown")) \
    X(family, "model_family", FT_FIELD_FAMILY, false, true, true, FT_FAMILY_LLAMA,  \
      FT_HF_SAME("model_type"), \
      ENUM, (SHAPE, 0, family_names, "model family: llama, qwen2 (q/k/v biases), qwen3 (q/k RMSNorm), mistral (sliding window), gpt_neox (GPTNeoXForCausalLM: LayerNorm, GELU MLP, partial rotary, parallel residual by model.parallel_residual), gptj (GPTJForCausalLM: one LayerNorm for parallel attention and MLP, interleaved partial rotary, lm_head bias)")) \
    X(sliding_window, "sliding_window", FT_FIELD_INT, false, true, true, 0,  \
      (NULL, "sliding_window", "sliding_window", "sliding_window", NULL, NULL), \
      INT, (SHAPE, 0, INT_MAX, 0, "mistral: each token attends to itself and the previous sliding_window-1 tokens; 0: no window")) \
    X(rotary_dim, "rotary_dim", FT_FIELD_INT, false, true, true, 0,  \
      FT_HF_KEYS(NULL, "rotary_pct", "rotary_dim"), \
      INT, (SHAPE, 0, INT_MAX, 0, "gpt_neox, gptj: leading dims of each head that RoPE rotates (even, <= head_dim; GPT-NeoX's rotary_pct x head_dim); 0: the whole head")) \
    X(parallel_residual, "parallel_residual", FT_FIELD_BOOL, false, true, true, 0,  \
      FT_HF_KEYS(NULL, "use_parallel_residual", NULL), \
      BOOL, (SHAPE, 0, "gpt_neox: x + attn(ln1(x)) + mlp(ln2(x)) (use_parallel_residual); false: sequential as Llama. gptj is always parallel")) \
    X(attention_bias, "attention_bias", FT_FIELD_BOOL, false, true, true, 0,  \
      ("attention_bias", NULL, "attention_bias", NULL, "attention_bias", NULL), \
      BOOL, (SHAPE, 0, "gpt_neox: biases on the q/k/v and output projections")) \
    X(gelu_tanh, "gelu_tanh", FT_FIELD_BOOL, false, true, true, 0,  \
      FT_HF_KEYS(NULL, "hidden_act", "activation_function"), \
      BOOL, (SHAPE, 0, "gpt_neox, gptj: the MLP's GELU is the tanh approximation (gelu_new, GPT-J's); false: exact (erf, \"gelu\", Pythia's)")) \
    X(rms_norm_eps, "rms_norm_eps", FT_FIELD_DOUBLE, true, false, false, 0,  \
      FT_HF_KEYS("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"), \
      FLOAT, (SHAPE | GT, 0.0, INF, 1e-5, "epsilon of the norms (RMSNorm; LayerNorm for gpt_neox, gptj)")) \
    X(rope_theta, "rope_theta", FT_FIELD_DOUBLE, true, false, false, 0,  \
      FT_HF_KEYS("rope_theta", "rotary_emb_base", NULL), \
      FLOAT, (SHAPE | GT, 0.0, INF, 10000.0, "RoPE base frequency"))

/* The table, in the order files are written; *n receives its length. */
const ft_model_field *ft_model_fields(size_t *n);

/* A field's value in c as a double (ints, bools and families are exact). */
double ft_model_field_get(const ft_model_config *c, const ft_model_field *f);
/* Stores v (already range-checked by the caller) into c's field. */
void ft_model_field_set(ft_model_config *c, const ft_model_field *f, double v);

#endif
