/* Hugging Face config.json of the families ftmpi trains (model/family.h:
 * LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM,
 * GPTNeoXForCausalLM, GPTJForCausalLM): read into ft_model_config and written back
 * (ftmpi-convert import/export). */
#ifndef FT_IO_HF_CONFIG_H
#define FT_IO_HF_CONFIG_H

#include <stdio.h>

#include "model/model_config.h"
#include "util/error.h"

typedef struct ft_hf_config_info {
    char torch_dtype[32];  /* "bfloat16", "float32", ... or "" when absent */
    int n_eos;             /* entries of eos_token_id when it was a list (0: an int/none) */
    char notes[512];       /* what was assumed or dropped, one "; "-separated line */
} ft_hf_config_info;

/* Reads and validates path (a config.json): model_type one of the families and,
 * when present, architectures containing its causal-LM class; the family's own
 * fields (qwen2/qwen3: use_sliding_window false; qwen3: head_dim default 128;
 * mistral: sliding_window, default 4096); the shape fields; rope_scaling (or
 * transformers 5's rope_parameters) with "rope_type" or legacy "type", null or
 * absent; optional head_dim, num_key_value_heads, tie_word_embeddings, bos/eos ids
 * (a list of eos ids keeps the first and says so in info->notes). Each family's key
 * names are the field table's (model/model_fields.h); gpt_neox and gptj add their
 * GELU and rotary fields (hf_config_family.c: read_gpt_neox, read_gptj).
 * Errors name the file and the field. */
int ft_hf_config_read(const char *path, ft_model_config *c, ft_hf_config_info *info,
                      ft_error *err);

/* Writes a config.json that transformers loads as the family's causal-LM class, with
 * torch_dtype ("bfloat16" or "float32"). */
int ft_hf_config_write(const char *path, const ft_model_config *c, const char *torch_dtype,
                       ft_error *err);

#endif
