#include "tokenizer/tok_bytelevel.h"

#include "tokenizer/tok_utf8.h"

/* The 68 bytes that are not printable Latin-1 fall in three runs: 0x00..0x20 (33 bytes),
 * 0x7F..0xA0 (34 bytes) and 0xAD (1 byte). Numbering them in byte order gives the closed
 * forms below, so no table (and no initialisation race) is needed. */

uint32_t tok_bytelevel_char(uint8_t byte)
{
    if (byte <= 0x20)
        return 256u + byte;
    if (byte >= 0x7F && byte <= 0xA0)
        return 256u + 33 + (byte - 0x7Fu);
    if (byte == 0xAD)
        return 256u + 67;
    return byte;
}

int tok_bytelevel_byte(uint32_t cp)
{
    if (cp < 256)
        return (cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) ? -1 : (int)cp;
    uint32_t n = cp - 256;
    if (n <= 32)
        return (int)n;
    if (n <= 66)
        return (int)(0x7F + (n - 33));
    if (n == 67)
        return 0xAD;
    return -1;
}

int tok_bytelevel_unmap(const char *s, size_t n, tok_buf *out)
{
    size_t start = out->len;
    if (tok_buf_reserve(out, n) < 0)
        return -1;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_next(u + i, n - i, &cp);
        int b = k < 0 ? -1 : tok_bytelevel_byte(cp);
        if (b < 0) {
            out->len = start;
            return 1;
        }
        out->data[out->len++] = (char)b;
        i += (size_t)k;
    }
    return 0;
}
