/* TFRecord framing, the container of TensorBoard event files:
 *   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) |
 *   data[length] | uint32 masked_crc32c(data)
 * with CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) masked as
 * ((crc >> 15) | (crc << 17)) + 0xa282ead8, so that a CRC of data holding CRCs stays
 * well distributed. */
#ifndef FT_IO_TFRECORD_H
#define FT_IO_TFRECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

uint32_t ft_crc32c(const void *data, size_t n);
uint32_t ft_tfrecord_mask(uint32_t crc);

/* Appends one record holding data[0..n) to f. 0, or -1 when a write failed. */
int ft_tfrecord_write(FILE *f, const void *data, size_t n);

#endif
