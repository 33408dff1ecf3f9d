/* Creating an output through a temporary file beside it.
 *
 * Why: OUT.tmp lives in a directory that others may be able to write to (a shared
 * checkpoint_dir, /tmp). Opening it with fopen("w") or H5F_ACC_TRUNC follows a symlink
 * planted there and overwrites whatever it points at. Here the temporary name is
 * created with O_CREAT|O_EXCL|O_NOFOLLOW, so the file written is always a new one made
 * by this process; a leftover OUT.tmp is removed first only when it is a regular file
 * of this user (a killed run's remains), anything else stops the tool with one line.
 * The finished file is then renamed over the final name (util/durable.h).
 *
 * A tool also refuses an output that is one of its inputs (same device and inode,
 * whatever the spelling of the paths): the rename would replace the input it was read
 * from. */
#ifndef FT_UTIL_OUTPUT_FILE_H
#define FT_UTIL_OUTPUT_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/error.h"

/* tmp = path + ".tmp"; fails (naming path) when it does not fit len. */
int ft_output_tmp_name(char *tmp, size_t len, const char *path, ft_error *err);

/* Removes a leftover tmp if it is a regular file owned by this user; absent is fine;
 * anything else (a symlink, a FIFO, a directory, another user's file) is an error that
 * says to remove it. */
int ft_output_clear_tmp(const char *tmp, ft_error *err);

/* ft_output_clear_tmp, then creates tmp new (O_EXCL|O_NOFOLLOW) for writing. */
int ft_output_create_tmp(const char *tmp, mode_t mode, int *fd, ft_error *err);

/* The same as a stdio stream ("w"). */
int ft_output_fopen_tmp(const char *tmp, FILE **fp, ft_error *err);

/* Fails when path exists and is neither a regular file nor a symlink (a device such as
 * /dev/null, a FIFO, a socket, a directory): renaming the finished file over it would
 * replace the device node itself (as root) instead of writing to it. what names the
 * option in the message. */
int ft_output_replaceable(const char *path, const char *what, ft_error *err);

/* Fails when out and in name the same file: the same device and inode when both exist,
 * else the same name once their directories are resolved (two outputs of one run). in
 * or out may be NULL or "-" (standard streams: no conflict). out_what/in_what name the
 * options in the message ("-o", "input"). */
int ft_output_not_input(const char *out, const char *out_what, const char *in,
                        const char *in_what, ft_error *err);

#endif
