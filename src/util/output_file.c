#include "util/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ft_output_tmp_name(char *tmp, size_t len, const char *path, ft_error *err)
{
    if (snprintf(tmp, len, "%s.tmp", path) >= (int)len)
        return ft_fail(err, "%s: path too long (at most %zu bytes with .tmp)", path, len - 1);
    return 0;
}

static const char *kind_of(mode_t m)
{
    return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "a special file";
}

int ft_output_clear_tmp(const char *tmp, ft_error *err)
{
    struct stat st;
    if (lstat(tmp, &st) != 0)
        return errno == ENOENT ? 0 : ft_fail(err, "%s: cannot check the temporary file: %s",
                                             tmp, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return ft_fail(err, "%s: the temporary file's name is taken by %s, which ftmpi will "
                       "not replace; remove it and run again", tmp, kind_of(st.st_mode));
    if (st.st_uid != geteuid())
        return ft_fail(err, "%s: a leftover temporary file of another user (uid %u); remove it "
                       "and run again", tmp, (unsigned)st.st_uid);
    if (unlink(tmp) != 0 && errno != ENOENT)
        return ft_fail(err, "%s: cannot remove the leftover temporary file: %s", tmp,
                       strerror(errno));
    return 0;
}

int ft_output_create_tmp(const char *tmp, mode_t mode, int *fd, ft_error *err)
{
    *fd = -1;
    if (ft_output_clear_tmp(tmp, err))
        return -1;
    /* O_EXCL: a name planted between the check and here (a symlink included, which
     * O_EXCL never follows) makes the open fail instead of writing through it */
    *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (*fd < 0)
        return ft_fail(err, "%s: cannot create: %s", tmp,
                       errno == EEXIST ? "created by someone else meanwhile; run again"
                                       : strerror(errno));
    return 0;
}

int ft_output_fopen_tmp(const char *tmp, FILE **fp, ft_error *err)
{
    int fd;
    *fp = NULL;
    if (ft_output_create_tmp(tmp, 0666, &fd, err))
        return -1;
    if (!(*fp = fdopen(fd, "w"))) {
        close(fd);
        unlink(tmp);
        return ft_fail(err, "%s: cannot open a stream: %s", tmp, strerror(errno));
    }
    return 0;
}

int ft_output_not_input(const char *out, const char *out_what, const char *in,
                        const char *in_what, ft_error *err)
{
    struct stat so, si;
    if (!out || !in || strcmp(in, "-") == 0 || stat(out, &so) != 0 || stat(in, &si) != 0)
        return 0;
    if (so.st_dev == si.st_dev && so.st_ino == si.st_ino)
        return ft_fail(err, "%s %s: is the same file as %s %s, which it would replace; "
                       "give another output path", out_what, out, in_what, in);
    return 0;
}
