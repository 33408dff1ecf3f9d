/* GPT-2 byte-level alphabet (`bytes_to_unicode`): every byte gets a printable code point so
 * that byte strings can be written as vocabulary strings. Bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves; the other 68 bytes map, in increasing byte order, to
 * U+0100, U+0101, ... (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'). */
#ifndef FT_TOKENIZER_TOK_BYTELEVEL_H
#define FT_TOKENIZER_TOK_BYTELEVEL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tok_buf.h"

uint32_t tok_bytelevel_char(uint8_t byte);
/* The byte a code point stands for, or -1 when it is not in the alphabet. */
int tok_bytelevel_byte(uint32_t cp);
/* Appends the bytes spelled by the byte-level string s. Returns 0, 1 when s holds a character
 * outside the alphabet or is not valid UTF-8 (out is then left unchanged), -1 when out of
 * memory. */
int tok_bytelevel_unmap(const char *s, size_t n, tok_buf *out);

#endif
