/* JSON-lines front end of the tokenizer, kept apart from the command line so that tools
 * (ftmpi-tok today, ftmpi-prep later) share it.
 *   encode: each input line {"text": "..."} -> one output line {"ids":[...]}
 *   decode: each input line {"ids":[...]}   -> one output line {"text":"..."}
 * Other keys in the input objects are ignored. Stops at the first bad line with an error
 * naming `in_name` and the line number. */
#ifndef FT_TOKENIZER_TOK_JSONL_H
#define FT_TOKENIZER_TOK_JSONL_H

#include <stdbool.h>
#include <stdio.h>

#include "tokenizer/tokenizer.h"

int ft_tok_jsonl_encode(const ft_tokenizer *t, FILE *in, const char *in_name, FILE *out,
                        bool allow_special, ft_error *err);
int ft_tok_jsonl_decode(const ft_tokenizer *t, FILE *in, const char *in_name, FILE *out,
                        bool skip_special, ft_error *err);

#endif
