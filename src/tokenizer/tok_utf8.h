/* UTF-8 helpers with the exact rules the tokenizer needs: well-formedness per Unicode
 * Table 3-7 (no overlongs, surrogates or code points above U+10FFFF), the "maximal subpart"
 * replacement used by Rust's String::from_utf8_lossy (and Python's errors="replace"), and
 * the Unicode White_Space property that HF's regexes and str::trim use. */
#ifndef FT_TOKENIZER_TOK_UTF8_H
#define FT_TOKENIZER_TOK_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tok_buf.h"

/* Looks at the sequence starting at s[0] (n >= 1 bytes available). Returns its length (1-4)
 * and sets *cp when it is well-formed; otherwise returns minus the length of its maximal
 * subpart (the longest prefix that could start a well-formed sequence, at least 1). */
int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Length of the longest well-formed prefix of s. */
size_t tok_utf8_valid_prefix(const char *s, size_t n);

/* Appends s to out, replacing each maximal invalid subpart by U+FFFD. -1 if out of memory. */
int tok_utf8_append_lossy(tok_buf *out, const char *s, size_t n);

/* Appends the UTF-8 encoding of cp (< 0x110000) to a 4-byte buffer; returns its length. */
int tok_utf8_encode(uint32_t cp, char out[4]);

/* Unicode White_Space (Rust char::is_whitespace, Oniguruma/Rust-regex \s): includes U+0085,
 * excludes U+FEFF and U+200B. */
bool tok_is_white_space(uint32_t cp);

#endif
