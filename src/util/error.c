#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ft_fail(ft_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->flags = 0;
    }
    return -1;
}

int ft_fail_context(ft_error *err, const char *fmt, ...)
{
    if (err) {
        char prefix[FT_ERROR_MAX];
        char old[FT_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        /* Truncation is acceptable: the message is for humans and the start matters most. */
        size_t n = strlen(prefix);
        if (n > sizeof err->msg - 3)
            n = sizeof err->msg - 3;
        memcpy(err->msg, prefix, n);
        memcpy(err->msg + n, ": ", 2);
        size_t room = sizeof err->msg - n - 3;
        size_t m = strnlen(old, room);
        memcpy(err->msg + n + 2, old, m);
        err->msg[n + 2 + m] = '\0';
    }
    return -1;
}

int ft_fail_context_path(ft_error *err, const char *path)
{
    const size_t n = strlen(path);
    if (err && !(strncmp(err->msg, path, n) == 0 && err->msg[n] == ':'))
        ft_fail_context(err, "%s", path);
    return -1;
}

void ft_error_clear(ft_error *err)
{
    if (err) {
        err->msg[0] = '\0';
        err->flags = 0;
    }
}
