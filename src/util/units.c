#include "util/units.h"

#include <math.h>
#include <stdio.h>

char *ft_format_bytes(char *buf, size_t len, double bytes)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    double v = isfinite(bytes) && bytes > 0 ? bytes : 0.0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f B", v);
    else /* three significant figures from GiB up, one decimal below */
        snprintf(buf, len, u >= 3 ? "%.2f %s" : "%.1f %s", v, unit[u]);
    return buf;
}

char *ft_format_duration(char *buf, size_t len, double seconds)
{
    if (!isfinite(seconds) || seconds < 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, len, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(buf, len, "%lds", s);
    return buf;
}
