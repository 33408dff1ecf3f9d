/* Model families: the Hugging Face architectures ftmpi trains, as a few switches
 * on one Llama-shaped block (model/block.c), never as copies of the model.
 *
 *   family   architecture         what differs from Llama
 *   llama    LlamaForCausalLM     -
 *   qwen2    Qwen2ForCausalLM     biases on the q, k and v projections
 *   qwen3    Qwen3ForCausalLM     per-head RMSNorm of q and k before RoPE
 *                                 (head_dim is its own config field)
 *   mistral  MistralForCausalLM   sliding-window attention when sliding_window > 0
 *   gpt_neox GPTNeoXForCausalLM   LayerNorm with bias; GELU MLP with biases; biases on
 *                                 q/k/v/o when attention_bias; partial rotary
 *                                 (rotary_dim, half-split); parallel residual when
 *                                 parallel_residual; HF fuses q/k/v into one tensor
 *                                 (the converter splits it)
 *   gptj     GPTJForCausalLM      one LayerNorm (with bias) feeding attention and MLP in
 *                                 parallel; GELU MLP with biases; no q/k/v/o biases;
 *                                 partial rotary in the interleaved style; lm_head bias
 *
 * The enum values are stored in run configs (model.architecture) and must keep
 * their order; weights files and checkpoints store the family's name. */
#ifndef FT_MODEL_FAMILY_H
#define FT_MODEL_FAMILY_H

#include <stdbool.h>

/* The family table: one row per family, in enum order (the values are stored in run
 * configs: append only). X(id, name, HF architecture, switches of ft_family_info).
 * Everything that lists the families expands this one list: the enum, family.c's
 * ft_family_info rows, the config schema's model.family names, ft_family_names(). */
#define FT_FAMILY_TABLE(X)                                                                  \
    X(LLAMA, "llama", "LlamaForCausalLM", .qkv_bias = false)                                \
    X(QWEN2, "qwen2", "Qwen2ForCausalLM", .qkv_bias = true)                                 \
    X(QWEN3, "qwen3", "Qwen3ForCausalLM", .qk_norm = true)                                  \
    X(MISTRAL, "mistral", "MistralForCausalLM", .sliding_window = true)                     \
    X(GPT_NEOX, "gpt_neox", "GPTNeoXForCausalLM", .layernorm = true, .gelu_mlp = true,      \
      .attention_bias_key = true, .parallel_residual_key = true)                            \
    X(GPTJ, "gptj", "GPTJForCausalLM", .layernorm = true, .gelu_mlp = true,                 \
      .shared_norm = true, .rope_interleaved = true, .lm_head_bias = true)

#define FT_FAMILY_ENUM_ROW(id, name, arch, ...) FT_FAMILY_##id,
typedef enum ft_model_family { FT_FAMILY_TABLE(FT_FAMILY_ENUM_ROW) FT_FAMILY_COUNT } ft_model_family;
#undef FT_FAMILY_ENUM_ROW

/* A row's name, for lists of names: { FT_FAMILY_TABLE(FT_FAMILY_NAME_ROW) NULL }. */
#define FT_FAMILY_NAME_ROW(id, name, arch, ...) name,

typedef struct ft_family_info {
    ft_model_family family;
    const char *name;         /* HF model_type, and the name in configs and weights files */
    const char *architecture; /* HF architectures[0] */
    bool qkv_bias;            /* q_proj, k_proj, v_proj have a bias */
    bool qk_norm;             /* q_norm, k_norm: RMSNorm over each head's head_dim */
    bool sliding_window;      /* config.json's sliding_window applies */
    /* The GPT-style switches (gpt_neox, gptj); all false for the Llama shape. */
    bool layernorm;           /* LayerNorm with a bias instead of RMSNorm (every norm) */
    bool gelu_mlp;            /* y = W2 gelu(W1 x + b1) + b2 instead of SwiGLU (no gate) */
    bool attention_bias_key;  /* the config's attention_bias gives q/k/v/o biases */
    bool parallel_residual_key; /* the config's parallel_residual chooses the residual */
    bool shared_norm;         /* one norm feeds attention and MLP (always parallel) */
    bool rope_interleaved;    /* RoPE pairs 2i with 2i+1 (GPT-J), not i with i + rot/2 */
    bool lm_head_bias;        /* the output projection has a bias */
} ft_family_info;

/* The family's description; NULL for a value outside the enum. */
const ft_family_info *ft_family_info_of(ft_model_family f);
/* By model_type / ftmpi name ("qwen2") or by HF architecture ("Qwen2ForCausalLM");
 * NULL when ftmpi has no such family. */
const ft_family_info *ft_family_by_name(const char *name);
const ft_family_info *ft_family_by_architecture(const char *architecture);
/* "llama, qwen2, qwen3, mistral, gpt_neox, gptj" for messages. */
const char *ft_family_names(void);

#endif
