/* Making a finished file durable under its final name: fsync the file, rename it over
 * the final name, fsync the directory. A crash at any moment leaves either the old
 * file or the complete new one under that name, never a partial one. */
#ifndef FT_UTIL_DURABLE_H
#define FT_UTIL_DURABLE_H

#include "util/error.h"

/* The directory path names into dir[len]: "/" for "/x", "." for a bare name. Returns
 * the offset of path's last component. */
size_t ft_path_dir(const char *path, char *dir, size_t len);

/* fsync of a path (file or directory); 0 or -1 with errno set. */
int ft_fsync_path(const char *path);

/* fsync tmp, rename tmp -> path, fsync path's directory. */
int ft_commit_file(const char *tmp, const char *path, ft_error *err);

#endif
