#include "tokenizer/tok_dir_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *ft_tok_dir_path(const char *tokenizer_path, const char *name)
{
    const char *slash = strrchr(tokenizer_path, '/');
    size_t dir = slash ? (size_t)(slash - tokenizer_path + 1) : 0, n = strlen(name);
    char *p = malloc(dir + n + 1);
    if (p) {
        memcpy(p, tokenizer_path, dir);
        memcpy(p + dir, name, n + 1);
    }
    return p;
}

static int config_fail(ft_error *err, const char *fmt, const char *path, const char *what)
{
    ft_fail(err, fmt, path, what);
    err->flags |= FT_ERR_CONFIG;
    return -1;
}

/* Opened non-blocking, so a FIFO cannot stall the open; the type is judged on the open
 * descriptor (no window between a stat and the open). */
static int read_bounded(const char *path, char **text, size_t *len, ft_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : config_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? config_fail(err, "%s: cannot stat: %s", path, strerror(errno))
             : !S_ISREG(st.st_mode)
                 ? config_fail(err, "%s: %s; expected a regular file (replace it with the file "
                                    "transformers wrote, or remove it)", path, "not a regular file")
             : st.st_size > (off_t)FT_TOK_DIR_FILE_MAX
                 ? config_fail(err, "%s: %s; expected at most 16 MiB (is it the right file?)",
                               path, "too large")
                 : 0;
    char *buf = rc ? NULL : malloc((size_t)st.st_size + 1);
    if (!rc && !buf)
        rc = config_fail(err, "%s: %s", path, "out of memory");
    size_t got = 0;
    while (!rc && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = config_fail(err, "%s: read error: %s", path, strerror(errno));
        else if (r == 0)
            break; /* shrank while read: what is there is judged */
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(buf);
        return -1;
    }
    buf[got] = '\0';
    if (strlen(buf) != got) {
        free(buf);
        return config_fail(err, "%s: %s; expected UTF-8 text", path, "contains a NUL byte");
    }
    *text = buf;
    *len = got;
    return 1;
}

int ft_tok_dir_read(const char *tokenizer_path, const char *name, char **text, size_t *len,
                    char **path, ft_error *err)
{
    *text = NULL;
    *path = ft_tok_dir_path(tokenizer_path, name);
    if (!*path)
        return config_fail(err, "%s: %s", tokenizer_path, "out of memory");
    int rc = read_bounded(*path, text, len, err);
    if (rc <= 0) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

int ft_tok_dir_json(const char *tokenizer_path, const char *name, json_t **obj, ft_error *err)
{
    char *text, *path;
    size_t len;
    *obj = NULL;
    int rc = ft_tok_dir_read(tokenizer_path, name, &text, &len, &path, err);
    if (rc <= 0)
        return rc;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &je);
    free(text);
    if (!root) {
        ft_fail(err, "%s: line %d column %d: invalid JSON: %s (fix or remove the file)", path,
                je.line, je.column, je.text);
        rc = -1;
    } else if (!json_is_object(root)) {
        json_decref(root);
        ft_fail(err, "%s: expected a JSON object at the top level (fix or remove the file)", path);
        rc = -1;
    }
    free(path);
    if (rc < 0) {
        err->flags |= FT_ERR_CONFIG;
        return -1;
    }
    *obj = root;
    return 1;
}
