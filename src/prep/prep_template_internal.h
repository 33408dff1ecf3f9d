/* Internals of the prompt templates, shared by prep_template.c (alpaca-style prompts, text,
 * the format dispatch), prep_chat.c (the chat templates) and prep_render.c (the render
 * buffer); not a public header: users of the templates include prep_template.h. */
#ifndef FT_PREP_TEMPLATE_INTERNAL_H
#define FT_PREP_TEMPLATE_INTERNAL_H

#include "prep/prep_template.h"

/* Sets err to "out of host memory"; returns -1. */
int prep_oom(ft_error *err);

/* Appending to a render (prep_render.c); each returns 0, or -1 with err set (out of memory).
 * prep_add_special appends nothing for id < 0 (the template has no such token). prep_add_text
 * appends to the last piece when that is text with the same target flag, so that the text
 * between two special tokens is encoded in one go, as HF does. */
int prep_add_special(prep_render *r, int32_t id, bool target, ft_error *err);
int prep_add_text(prep_render *r, const char *s, size_t n, bool target, ft_error *err);
int prep_add_cstr(prep_render *r, const char *s, bool target, ft_error *err);

/* Renders a PREP_FORMAT_CHAT record (messages, or ShareGPT's conversations) with the chat
 * template t->kind names (prep_chat.c); r is already reset. Returns 0, or -1 with err set, as
 * prep_render_json. */
int prep_render_chat(const prep_template *t, json_t *obj, prep_render *r, ft_error *err);

#endif
