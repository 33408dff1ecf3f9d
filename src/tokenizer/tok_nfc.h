/* Unicode NFC (canonical decomposition, canonical ordering, canonical composition), as the HF
 * "NFC" normalizer (Rust unicode-normalization) applies it. Qwen2/2.5/3 tokenizers use it. */
#ifndef FT_TOKENIZER_TOK_NFC_H
#define FT_TOKENIZER_TOK_NFC_H
#include <stddef.h>
#include "tokenizer/tok_buf.h"

/* Appends NFC(s) to out. Bytes that are not well-formed UTF-8 are copied unchanged and end the
 * run of text around them (HF never sees such bytes: Python strings cannot hold them).
 * Returns 0, or -1 when out of memory. */
int tok_nfc(const char *s, size_t n, tok_buf *out);

/* The Unicode version of the tables (tok_nfc_table.h). */
const char *tok_nfc_unicode_version(void);
#endif
