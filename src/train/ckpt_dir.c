#include "train/ckpt_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/input_file.h"
#include "util/path_join.h"

int ft_ckpt_step_of_name(const char *name, long *step)
{
    const size_t len = strlen(name);
    if (strncmp(name, "step-", 5) != 0 || len < 9 || strcmp(name + len - 3, ".h5") != 0)
        return -1;
    long v = 0;
    for (const char *p = name + 5; p < name + len - 3; p++) {
        if (!isdigit((unsigned char)*p) || v > (LONG_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 0;
}

int ft_ckpt_step_path(char *out, size_t len, const char *dir, long step)
{
    char name[64];
    snprintf(name, sizeof name, "step-%06ld.h5", step);
    return ft_path_join(out, len, dir, name);
}

int ft_ckpt_read_latest(const char *dir, char *name, size_t len, ft_error *err)
{
    char latest[1100];
    ft_path_join(latest, sizeof latest, dir, FT_CKPT_LATEST);
    struct stat st;
    if (lstat(latest, &st) != 0 && errno == ENOENT)
        return 1;
    /* a FIFO here would hang every rank until comm_timeout, which blames the network */
    FILE *fp;
    if (ft_input_fopen(latest, "a checkpoint pointer (one file name)", 4096, &fp, err))
        return ft_fail_context(err, "checkpoint_dir");
    name[0] = '\0';
    const int got = fgets(name, (int)len, fp) != NULL;
    fclose(fp);
    name[strcspn(name, "\r\n")] = '\0';
    /* only a plain, printable file name in the directory: anything else (a path, binary
     * garbage, an empty file) is reported without echoing its bytes */
    int printable = got && name[0] != '\0' && strcmp(name, ".") && strcmp(name, "..");
    for (const char *p = name; printable && *p; p++)
        printable = isprint((unsigned char)*p) && *p != '/';
    if (!printable)
        return ft_fail(err, "%s: does not name a checkpoint file; delete it to start fresh",
                       latest);
    return 0;
}

typedef struct ckpt_entry {
    long step;
    char *name;
} ckpt_entry;

static int by_step(const void *a, const void *b)
{
    const long x = ((const ckpt_entry *)a)->step, y = ((const ckpt_entry *)b)->step;
    return (x > y) - (x < y);
}

/* The step-*.h5 files of dir, oldest first. */
static int list_checkpoints(const char *dir, ckpt_entry **out, int *count, ft_error *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return ft_fail(err, "checkpoint_dir %s: cannot list: %s", dir, strerror(errno));
    ckpt_entry *v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        long step;
        if (ft_ckpt_step_of_name(de->d_name, &step))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry *grown = realloc(v, (size_t)cap * sizeof *v);
            if (!grown) {
                rc = ft_fail(err, "out of host memory");
                break;
            }
            v = grown;
        }
        v[n].step = step;
        if (!(v[n].name = strdup(de->d_name)))
            rc = ft_fail(err, "out of host memory");
        else
            n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof *v, by_step);
    *out = v;
    *count = n;
    return rc;
}

/* The invariant: `latest` names an existing HDF5 file. */
static int check_latest(const char *dir, ft_error *err)
{
    char name[512], path[1700], latest[1100];
    ft_path_join(latest, sizeof latest, dir, FT_CKPT_LATEST);
    int rc = ft_ckpt_read_latest(dir, name, sizeof name, err);
    if (rc)
        return rc < 0 ? -1 : ft_fail(err, "%s: missing after a checkpoint", latest);
    ft_path_join(path, sizeof path, dir, name);
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode) || H5Fis_hdf5(path) <= 0)
        return ft_fail(err, "%s names %s, which is not a checkpoint file", latest, path);
    return 0;
}

int ft_ckpt_prune(const char *dir, int keep, const char *spare, ft_error *err)
{
    if (keep <= 0)
        return check_latest(dir, err);
    char latest[512] = "";
    if (ft_ckpt_read_latest(dir, latest, sizeof latest, err) < 0)
        return -1;
    ckpt_entry *v = NULL;
    int n = 0;
    int rc = list_checkpoints(dir, &v, &n, err);
    for (int i = 0; i < n; i++) {
        /* the file `latest` names stays even if a newer-named stray file exists */
        if (!rc && i < n - keep && strcmp(v[i].name, latest) != 0 &&
            !(spare && strcmp(v[i].name, spare) == 0)) {
            char path[1700];
            ft_path_join(path, sizeof path, dir, v[i].name);
            if (unlink(path) && errno != ENOENT)
                rc = ft_fail(err, "%s: cannot delete an old checkpoint (keep_last %d): %s",
                             path, keep, strerror(errno));
        }
        free(v[i].name);
    }
    free(v);
    return rc ? -1 : check_latest(dir, err);
}

int ft_ckpt_lock(const char *dir, int *fd, ft_error *err)
{
    char path[1100];
    ft_path_join(path, sizeof path, dir, ".ftmpi-lock");
    /* the lock file is truncated and written: a symlink planted under its name is not
     * followed (O_NOFOLLOW), a FIFO does not block the open (O_NONBLOCK) and is refused */
    *fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    if (*fd < 0)
        return ft_fail(err, "%s: cannot open the lock file: %s%s", path, strerror(errno),
                       errno == ELOOP ? " (a symbolic link there is not followed; remove it)" : "");
    struct stat st;
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return ft_fail(err, "%s: the lock file is not a regular file; remove it", path);
    }
    struct flock lk = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    if (fcntl(*fd, F_SETLK, &lk) != 0) {
        const int code = errno;
        char owner[300] = "";
        const ssize_t got = pread(*fd, owner, sizeof owner - 1, 0);
        owner[got > 0 ? got : 0] = '\0';
        owner[strcspn(owner, "\r\n")] = '\0';
        close(*fd);
        *fd = -1;
        if (code == EACCES || code == EAGAIN)
            return ft_fail(err, "checkpoint_dir %s: in use by another running job (%s holds "
                           "%s); give this run its own checkpoint_dir, or wait for that job",
                           dir, owner[0] ? owner : "unknown process", path);
        return ft_fail(err, "%s: cannot lock: %s", path, strerror(code));
    }
    char host[256] = "?", me[300];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    const int n = snprintf(me, sizeof me, "pid %ld on %s\n", (long)getpid(), host);
    if (ftruncate(*fd, 0) || pwrite(*fd, me, (size_t)n, 0) != n) {
        /* the lock holds without the note; only the message of a second job is poorer */
    }
    return 0;
}
