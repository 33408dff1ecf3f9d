#include "io/tfrecord.h"

/* Bitwise CRC-32C: records are a few hundred bytes once per step, so no table. */
uint32_t ft_crc32c(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t ft_tfrecord_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

int ft_tfrecord_write(FILE *f, const void *data, size_t n)
{
    uint8_t head[12], tail[4];
    put_le(head, (uint64_t)n, 8);
    put_le(head + 8, ft_tfrecord_mask(ft_crc32c(head, 8)), 4);
    put_le(tail, ft_tfrecord_mask(ft_crc32c(data, n)), 4);
    if (fwrite(head, 1, sizeof head, f) != sizeof head || fwrite(data, 1, n, f) != n ||
        fwrite(tail, 1, sizeof tail, f) != sizeof tail)
        return -1;
    return 0;
}
