/* Which known chat template a tokenizer_config.json `chat_template` is. ftmpi cannot run
 * Jinja, so it recognises the templates it implements by their distinctive text and refuses
 * anything else. ftmpi-prep and ftmpi-generate both ask this one function, so they agree on
 * every tokenizer directory. */
#ifndef FT_TOKENIZER_CHAT_TEMPLATE_H
#define FT_TOKENIZER_CHAT_TEMPLATE_H

#include "util/error.h"

/* The template's name as ftmpi-prep's --template spells it ("llama3-chat", "llama3.1-chat",
 * "llama2-chat", "chatml", "qwen2-chat", "qwen2.5-chat", "qwen3-chat", "smollm2-chat",
 * "mistral-chat"), or
 * NULL when the Jinja text is not one ftmpi knows. Static strings. */
const char *ft_chat_template_match(const char *jinja);

/* The template of tokenizer_path's directory, from the first source transformers reads:
 * chat_template.jinja, chat_template.json, then tokenizer_config.json's chat_template (a
 * string, or a list of named templates whose "default" is used). Returns 1 with *name set
 * when it is a known template, 0 when there is none, and -1 with err set (one line: which
 * file, what is wrong, what to do; flags FT_ERR_CONFIG) when a file is malformed, not a
 * regular file, too large, or holds a template ftmpi does not know. */
int ft_chat_template_detect(const char *tokenizer_path, const char **name, ft_error *err);

/* A chat model's tokenizer ends its text with a turn's end (eos_token <|im_end|>, <|eot_id|>,
 * ...): that token's name (static), or NULL. For saying that such a model was prompted
 * without a template. */
const char *ft_chat_template_turn_eos(const char *tokenizer_path);

/* The names the error message offers, for the front ends' own messages. */
#define FT_CHAT_TEMPLATE_NAMES \
    "llama3-chat, llama3.1-chat, llama2-chat, chatml, qwen2-chat, qwen2.5-chat, qwen3-chat, " \
    "smollm2-chat, mistral-chat"

#endif
