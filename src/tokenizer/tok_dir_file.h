/* The files transformers keeps beside tokenizer.json (tokenizer_config.json,
 * chat_template.jinja, chat_template.json): found by name in tokenizer.json's directory and
 * read with a size bound, regular files only, so a FIFO, /dev/zero or a huge file is one
 * line of error rather than a hang or an exhausted memory. Every error is marked
 * FT_ERR_CONFIG: the user's input is at fault, and the tools exit 2. */
#ifndef FT_TOKENIZER_TOK_DIR_FILE_H
#define FT_TOKENIZER_TOK_DIR_FILE_H

#include <stddef.h>

#include "util/error.h"

struct json_t;

/* Larger than any real tokenizer_config.json or chat template (Llama 3's is 50 KB). */
#define FT_TOK_DIR_FILE_MAX (16u << 20)

/* path of `name` in the directory of tokenizer_path; malloc'd, NULL when out of memory. */
char *ft_tok_dir_path(const char *tokenizer_path, const char *name);

/* Reads dir(tokenizer_path)/name whole. Returns 0 with *text = NULL when there is no such
 * file, 1 with *text (malloc'd, NUL-terminated, *len bytes) and *path (malloc'd) when read,
 * -1 with err set otherwise (not a regular file, too large, unreadable, NUL byte). */
int ft_tok_dir_read(const char *tokenizer_path, const char *name, char **text, size_t *len,
                    char **path, ft_error *err);

/* Reads dir(tokenizer_path)/name as a JSON object (numbers beyond 64 bits as reals, which
 * HF configs hold: model_max_length = 1e30). Returns 0 with *obj = NULL when absent, 1 with
 * *obj when read, -1 with err set (the above, invalid JSON with line and column, or not an
 * object). */
int ft_tok_dir_json(const char *tokenizer_path, const char *name, struct json_t **obj,
                    ft_error *err);

#endif
