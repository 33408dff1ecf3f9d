#include "util/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ft_fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

size_t ft_path_dir(const char *path, char *dir, size_t len)
{
    snprintf(dir, len, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(dir, len, ".");
        return 0;
    }
    const size_t base = (size_t)(slash - dir) + 1;
    *(slash == dir ? slash + 1 : slash) = '\0';
    return base;
}

int ft_commit_file(const char *tmp, const char *path, ft_error *err)
{
    char dir[1100];
    ft_path_dir(path, dir, sizeof dir);
    /* a device, FIFO or socket at the name would itself be replaced (as root, /dev/null
     * by an HDF5 file): the written file stays at tmp */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return ft_fail(err, "%s: is not a regular file, and ftmpi will not replace it; the "
                       "finished file is %s", path, tmp);
    if (ft_fsync_path(tmp) || rename(tmp, path) || ft_fsync_path(dir))
        return ft_fail(err, "%s: cannot complete the file (from %s): %s", path, tmp,
                       strerror(errno));
    return 0;
}
