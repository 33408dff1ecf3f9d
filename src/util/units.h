/* Human-readable sizes for log lines. Binary units (KiB = 1024 B), the unit chosen so
 * the number stays below 1024; exact byte counts belong in the metrics file. */
#ifndef FT_UTIL_UNITS_H
#define FT_UTIL_UNITS_H

#include <stddef.h>

/* "512 B", "12.3 KiB", "151.0 MiB", "2.41 GiB", "1.20 TiB" into buf. Returns buf. */
char *ft_format_bytes(char *buf, size_t len, double bytes);

/* "45s", "3m02s", "1h02m"; "-" when seconds is negative or not finite. Returns buf. */
char *ft_format_duration(char *buf, size_t len, double seconds);

#endif
