#include "util/input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "a special file";
}

/* The verdict on a file's stat: regular and within the bound. */
static int check_stat(const char *path, const char *what, const struct stat *st,
                      uint64_t max_bytes, ft_error *err)
{
    if (!S_ISREG(st->st_mode))
        return ft_fail(err, "%s: is %s, not a regular file; give the path of %s", path,
                       kind_of(st->st_mode), what);
    if ((uint64_t)st->st_size > max_bytes)
        return ft_fail(err, "%s: %.1f MB, more than the %.0f MB ftmpi reads as %s; is it one?",
                       path, (double)st->st_size / 1e6, (double)max_bytes / 1e6, what);
    return 0;
}

int ft_input_check(const char *path, const char *what, ft_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ft_fail(err, "%s: cannot open: %s", path, strerror(errno));
    return check_stat(path, what, &st, FT_INPUT_UNBOUNDED, err);
}

int ft_input_open(const char *path, const char *what, uint64_t max_bytes, int *fd,
                  uint64_t *size, ft_error *err)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0)
        return ft_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(*fd, &st) != 0 ? ft_fail(err, "%s: cannot stat: %s", path, strerror(errno))
                                  : check_stat(path, what, &st, max_bytes, err);
    /* a regular file: plain blocking reads from here on */
    if (!rc && fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = ft_fail(err, "%s: cannot set up reading: %s", path, strerror(errno));
    if (rc) {
        close(*fd);
        *fd = -1;
        return -1;
    }
    if (size)
        *size = (uint64_t)st.st_size;
    return 0;
}

int ft_input_fopen(const char *path, const char *what, uint64_t max_bytes, FILE **fp,
                   ft_error *err)
{
    int fd;
    *fp = NULL;
    if (ft_input_open(path, what, max_bytes, &fd, NULL, err))
        return -1;
    if (!(*fp = fdopen(fd, "rb"))) {
        close(fd);
        return ft_fail(err, "%s: cannot open a stream: %s", path, strerror(errno));
    }
    return 0;
}

int ft_input_read_stream(FILE *fp, const char *name, uint64_t max_bytes, char **data,
                         size_t *len, ft_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, fp);
        if (n < cap - 1)
            break;
        if (n >= max_bytes) {
            free(buf);
            return ft_fail(err, "%s: more than %.0f MB: not the text expected there?", name,
                           (double)max_bytes / 1e6);
        }
        char *bigger = realloc(buf, cap * 2);
        if (!bigger)
            free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (!buf)
        return ft_fail(err, "%s: out of memory while reading", name);
    if (ferror(fp) || n > max_bytes) {
        free(buf);
        return n > max_bytes ? ft_fail(err, "%s: more than %.0f MB: not the text expected "
                                       "there?", name, (double)max_bytes / 1e6)
                             : ft_fail(err, "%s: read error: %s", name, strerror(errno));
    }
    buf[n] = '\0';
    *data = buf;
    if (len)
        *len = n;
    return 0;
}

int ft_input_read(const char *path, const char *what, uint64_t max_bytes, char **data,
                  size_t *len, ft_error *err)
{
    FILE *fp;
    *data = NULL;
    if (ft_input_fopen(path, what, max_bytes, &fp, err))
        return -1;
    int rc = ft_input_read_stream(fp, path, max_bytes, data, len, err);
    fclose(fp);
    return rc;
}

long ft_input_getline(char **line, size_t *cap, FILE *fp, size_t max)
{
    size_t n = 0;
    int c = EOF;
    flockfile(fp);
    while (n <= max && (c = getc_unlocked(fp)) != EOF) {
        if (n + 2 > *cap) {
            size_t grown = *cap ? 2 * *cap : 256;
            char *bigger = realloc(*line, grown);
            if (!bigger) {
                funlockfile(fp);
                return -3;
            }
            *line = bigger;
            *cap = grown;
        }
        (*line)[n++] = (char)c;
        if (c == '\n')
            break;
    }
    funlockfile(fp);
    if (n > max)
        return -2;
    if (n == 0)
        return -1;
    (*line)[n] = '\0';
    return (long)n;
}
