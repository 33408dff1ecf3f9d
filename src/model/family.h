/* Model families: the Hugging Face architectures ftmpi trains, as a few switches
 * on one Llama-shaped block (model/block.c), never as copies of the model.
 *
 *   family   architecture         what differs from Llama
 *   llama    LlamaForCausalLM     -
 *   qwen2    Qwen2ForCausalLM     biases on the q, k and v projections
 *   qwen3    Qwen3ForCausalLM     per-head RMSNorm of q and k before RoPE
 *                                 (head_dim is its own config field)
 *   mistral  MistralForCausalLM   sliding-window attention when sliding_window > 0
 *
 * The enum values are stored in run configs (model.architecture) and must keep
 * their order; weights files and checkpoints store the family's name. */
#ifndef FT_MODEL_FAMILY_H
#define FT_MODEL_FAMILY_H

#include <stdbool.h>

typedef enum ft_model_family {
    FT_FAMILY_LLAMA = 0,
    FT_FAMILY_QWEN2 = 1,
    FT_FAMILY_QWEN3 = 2,
    FT_FAMILY_MISTRAL = 3,
    FT_FAMILY_COUNT
} ft_model_family;

typedef struct ft_family_info {
    ft_model_family family;
    const char *name;         /* HF model_type, and the name in configs and weights files */
    const char *architecture; /* HF architectures[0] */
    bool qkv_bias;            /* q_proj, k_proj, v_proj have a bias */
    bool qk_norm;             /* q_norm, k_norm: RMSNorm over each head's head_dim */
    bool sliding_window;      /* config.json's sliding_window applies */
} ft_family_info;

/* The family's description; NULL for a value outside the enum. */
const ft_family_info *ft_family_info_of(ft_model_family f);
/* By model_type / ftmpi name ("qwen2") or by HF architecture ("Qwen2ForCausalLM");
 * NULL when ftmpi has no such family. */
const ft_family_info *ft_family_by_name(const char *name);
const ft_family_info *ft_family_by_architecture(const char *architecture);
/* "llama, qwen2, qwen3, mistral" for messages. */
const char *ft_family_names(void);

#endif
