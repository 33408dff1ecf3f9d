/* Error reporting for ftmpi.
 *
 * Every fallible function takes an `ft_error *` and returns 0 on success or -1 on
 * failure after filling the error with one human-readable line: which file, where,
 * what is wrong and, when known, what to do. Errors travel up to main(), which prints
 * them and picks the exit code; nothing below main() calls exit().
 */
#ifndef FT_UTIL_ERROR_H
#define FT_UTIL_ERROR_H

#include <stddef.h>

#define FT_ERROR_MAX 1024

typedef struct ft_error {
    char msg[FT_ERROR_MAX];
    int flags; /* FT_ERR_* */
} ft_error;

/* Every rank holds this same error (ft_agree, or a failure all ranks reach alike):
 * main() lets rank 0 print it once and ends the job without an abort. */
#define FT_ERR_SHARED 1
/* The configuration is at fault (the message names its file:line or override), though
 * found only at run time (e.g. against the data): exit code 2, as for the config. */
#define FT_ERR_CONFIG 2

/* Formats the message (printf-style) into err (if non-NULL) and returns -1 so that
 * callers can write `return ft_fail(err, "...", ...);`. */
int ft_fail(ft_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message, for adding context on the way up. */
int ft_fail_context(ft_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ft_fail_context(err, "%s", path) unless the message already starts with "path: ": a
 * file's name once, whichever level named it first. */
int ft_fail_context_path(ft_error *err, const char *path);

void ft_error_clear(ft_error *err);

#endif
