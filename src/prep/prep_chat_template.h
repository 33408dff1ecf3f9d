/* Which known chat template a tokenizer_config.json `chat_template` is. ftmpi cannot run
 * Jinja, so it recognises the templates it implements by their distinctive text (whitespace
 * removed, so that re-indented copies still match) and refuses anything else. */
#ifndef FT_PREP_CHAT_TEMPLATE_H
#define FT_PREP_CHAT_TEMPLATE_H

#include "prep/prep_template.h"

/* The template kind of a chat_template string; PREP_TPL_AUTO when it is not a known one. */
prep_template_kind prep_chat_template_match(const char *jinja);

/* Looks for tokenizer_config.json next to tokenizer_path. Returns 1 with *kind set when its
 * chat_template is a known template, 0 when there is no such file or no chat_template, and -1
 * with err set (one line: which file, that the template is unknown, what to do) otherwise. */
int prep_chat_template_detect(const char *tokenizer_path, prep_template_kind *kind,
                              ft_error *err);
#endif
