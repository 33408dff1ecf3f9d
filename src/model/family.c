/* The table of model families (model/family.h). */
#include "model/family.h"

#include <stddef.h>
#include <string.h>

static const ft_family_info families[FT_FAMILY_COUNT] = {
    { FT_FAMILY_LLAMA, "llama", "LlamaForCausalLM", .qkv_bias = false },
    { FT_FAMILY_QWEN2, "qwen2", "Qwen2ForCausalLM", .qkv_bias = true },
    { FT_FAMILY_QWEN3, "qwen3", "Qwen3ForCausalLM", .qk_norm = true },
    { FT_FAMILY_MISTRAL, "mistral", "MistralForCausalLM", .sliding_window = true },
    { FT_FAMILY_GPT_NEOX, "gpt_neox", "GPTNeoXForCausalLM", .layernorm = true, .gelu_mlp = true,
      .attention_bias_key = true, .parallel_residual_key = true },
    { FT_FAMILY_GPTJ, "gptj", "GPTJForCausalLM", .layernorm = true, .gelu_mlp = true,
      .shared_norm = true, .rope_interleaved = true, .lm_head_bias = true },
};

const ft_family_info *ft_family_info_of(ft_model_family f)
{
    return (int)f >= 0 && f < FT_FAMILY_COUNT ? &families[f] : NULL;
}

const ft_family_info *ft_family_by_name(const char *name)
{
    for (int i = 0; i < FT_FAMILY_COUNT; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

const ft_family_info *ft_family_by_architecture(const char *architecture)
{
    for (int i = 0; i < FT_FAMILY_COUNT; i++)
        if (strcmp(families[i].architecture, architecture) == 0)
            return &families[i];
    return NULL;
}

const char *ft_family_names(void)
{
    return "llama, qwen2, qwen3, mistral, gpt_neox, gptj";
}
