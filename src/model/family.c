/* The table of model families (model/family.h). */
#include "model/family.h"

#include <stddef.h>
#include <string.h>

static const ft_family_info families[FT_FAMILY_COUNT] = {
    { FT_FAMILY_LLAMA, "llama", "LlamaForCausalLM", false, false, false },
    { FT_FAMILY_QWEN2, "qwen2", "Qwen2ForCausalLM", true, false, false },
    { FT_FAMILY_QWEN3, "qwen3", "Qwen3ForCausalLM", false, true, false },
    { FT_FAMILY_MISTRAL, "mistral", "MistralForCausalLM", false, false, true },
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
    return "llama, qwen2, qwen3, mistral";
}
