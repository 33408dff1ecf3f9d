#include "util/output_file.h"

#include "util/durable.h"
#include "util/path_join.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
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

int ft_output_replaceable(const char *path, const char *what, ft_error *err)
{
    struct stat st;
    if (!path || lstat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))
        return 0;
    return ft_fail(err, "%s %s: is %s, which the finished file would replace; give the path "
                   "of a file", what, path, kind_of(st.st_mode));
}

/* path's directory made canonical, plus its last component: the file path names, for
 * comparing names of files that do not exist yet. 0, or -1 when the directory does
 * not resolve. */
static int canonical_name(const char *path, char *out, size_t len)
{
    char dir[PATH_MAX];
    const char *base = path + ft_path_dir(path, dir, sizeof dir);
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return -1;
    return ft_path_join(out, len, real, base);
}

int ft_output_not_input(const char *out, const char *out_what, const char *in,
                        const char *in_what, ft_error *err)
{
    if (!out || !in || strcmp(in, "-") == 0 || strcmp(out, "-") == 0)
        return 0;
    struct stat so, si;
    const int have_out = stat(out, &so) == 0, have_in = stat(in, &si) == 0;
    int same = have_out && have_in && so.st_dev == si.st_dev && so.st_ino == si.st_ino;
    if (!have_out || !have_in) { /* two outputs not written yet: the same name? */
        char a[PATH_MAX + 256], b[PATH_MAX + 256];
        same = canonical_name(out, a, sizeof a) == 0 && canonical_name(in, b, sizeof b) == 0 &&
               strcmp(a, b) == 0;
    }
    if (same)
        return ft_fail(err, "%s %s: is the same file as %s %s, which it would replace; "
                       "give another output path", out_what, out, in_what, in);
    return 0;
}
