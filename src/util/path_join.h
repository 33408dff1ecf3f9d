/* Joining a directory a user named and a file name in it, for every tool that builds file
 * paths. Users type directories with a trailing slash (shell completion adds one), and a
 * plain "%s/%s" then gives "ck//step-000010.h5" in every message; the kernel does not mind,
 * but people copy these paths, compare them and grep logs for them. */
#ifndef FT_UTIL_PATH_JOIN_H
#define FT_UTIL_PATH_JOIN_H

#include <stddef.h>

/* out (len bytes) = dir + "/" + name with exactly one slash between them: dir's trailing
 * slashes are dropped (the root "/" stays "/"), an empty dir gives name alone, and an empty
 * name gives "dir/" (the directory as it is shown, e.g. "exported ... -> out/").
 * Returns 0, or -1 when the result does not fit (out then holds as much as fits). */
int ft_path_join(char *out, size_t len, const char *dir, const char *name);

#endif
