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

/* Looks for tokenizer_config.json next to tokenizer_path. Returns 1 with *name set when its
 * chat_template is a known template, 0 when there is no such file or no chat_template, and -1
 * with err set (one line: which file, that the template is unknown, what to do) otherwise. */
int ft_chat_template_detect(const char *tokenizer_path, const char **name, ft_error *err);

/* The names the error message offers, for the front ends' own messages. */
#define FT_CHAT_TEMPLATE_NAMES \
    "llama3-chat, llama3.1-chat, llama2-chat, chatml, qwen2-chat, qwen2.5-chat, qwen3-chat, " \
    "smollm2-chat, mistral-chat"

#endif
