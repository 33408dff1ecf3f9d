#include "util/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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

int ft_commit_file(const char *tmp, const char *path, ft_error *err)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    if (ft_fsync_path(tmp) || rename(tmp, path) || ft_fsync_path(dir))
        return ft_fail(err, "%s: cannot complete the file (from %s): %s", path, tmp,
                       strerror(errno));
    return 0;
}
