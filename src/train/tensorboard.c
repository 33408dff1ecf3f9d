#include "train/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/run_config.h"
#include "io/tfrecord.h"
#include "train/metrics.h"
#include "util/make_dirs.h"
#include "util/path_join.h"

struct ft_tb_writer {
    FILE *f;
    char path[FT_CONFIG_PATH_MAX + 320]; /* dir (checked at start-up), name, host */
};

/* A protobuf message being built: bytes appended until the fixed capacity, which holds
 * an event of a few dozen scalars; overflow is remembered and refused at the end. */
typedef struct pb_buf {
    uint8_t b[4096];
    size_t n;
    int overflow;
} pb_buf;

static void pb_bytes(pb_buf *m, const void *p, size_t n)
{
    if (m->n + n > sizeof m->b) {
        m->overflow = 1;
        return;
    }
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

/* Base-128 varint, 7 bits per byte, low group first, high bit = more follow. */
static void pb_varint(pb_buf *m, uint64_t v)
{
    uint8_t out[10];
    size_t n = 0;
    do {
        out[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    pb_bytes(m, out, n);
}

/* Key = field number << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited,
 * 5 fixed32). */
static void pb_key(pb_buf *m, int field, int wire) { pb_varint(m, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_fixed(pb_buf *m, uint64_t bits, int bytes)
{
    uint8_t out[8];
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(bits >> (8 * i));
    pb_bytes(m, out, (size_t)bytes);
}

static void pb_double(pb_buf *m, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(m, field, 1);
    pb_fixed(m, bits, 8);
}

static void pb_float(pb_buf *m, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(m, field, 5);
    pb_fixed(m, bits, 4);
}

static void pb_len(pb_buf *m, int field, const void *p, size_t n)
{
    pb_key(m, field, 2);
    pb_varint(m, n);
    pb_bytes(m, p, n);
}

static int write_event(ft_tb_writer *w, const pb_buf *ev, ft_error *err)
{
    if (ev->overflow)
        return ft_fail(err, "%s: event larger than %zu bytes (too many scalars)", w->path,
                       sizeof ev->b);
    if (ft_tfrecord_write(w->f, ev->b, ev->n) || fflush(w->f))
        return ft_fail(err, "%s: cannot write: %s", w->path, strerror(errno));
    return 0;
}

double ft_tb_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ft_tb_open(ft_tb_writer **out, const char *dir, ft_error *err)
{
    const double wall_time = ft_tb_wall_time();
    *out = NULL;
    if (ft_make_dirs(dir))
        return ft_fail(err, "tensorboard_dir %s: cannot create it: %s; choose a writable "
                       "directory", dir, strerror(errno));
    ft_tb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ft_fail(err, "out of host memory");
    char host[256];
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    /* TensorFlow's name: seconds as ten digits, then the host */
    char name[400];
    snprintf(name, sizeof name, "events.out.tfevents.%010ld.%s", (long)wall_time, host);
    ft_path_join(w->path, sizeof w->path, dir, name);
    /* appending: a run restarted within the same second continues the file; a symlink
     * planted at the name is not written through, nor anything but a regular file */
    const int fd = open(w->path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                                     O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(w->f = fdopen(fd, "ab"))) {
        if (fd >= 0) {
            close(fd);
            errno = EINVAL;
        }
        ft_fail(err, "tensorboard_dir: cannot create %s: %s; choose a writable directory",
                w->path, strerror(errno));
        free(w);
        return -1;
    }
    pb_buf ev = { .n = 0 };
    static const char version[] = "brain.Event:2";
    pb_double(&ev, 1, wall_time);
    pb_len(&ev, 3, version, sizeof version - 1);
    if (write_event(w, &ev, err)) {
        ft_tb_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

int ft_tb_scalars(ft_tb_writer *w, long step, double wall_time, const ft_tb_scalar *v, int n,
                  ft_error *err)
{
    pb_buf summary = { .n = 0 };
    for (int i = 0; i < n; i++) {
        if (!isfinite(v[i].value))
            continue;
        pb_buf value = { .n = 0 };
        pb_len(&value, 1, v[i].tag, strlen(v[i].tag));
        pb_float(&value, 2, (float)v[i].value);
        pb_len(&summary, 1, value.b, value.n);
        summary.overflow |= value.overflow;
    }
    pb_buf ev = { .n = 0 };
    pb_double(&ev, 1, wall_time);
    pb_key(&ev, 2, 0);
    pb_varint(&ev, (uint64_t)step); /* int64: a negative step would take ten bytes */
    pb_len(&ev, 5, summary.b, summary.n);
    ev.overflow |= summary.overflow;
    return write_event(w, &ev, err);
}

const char *ft_tb_path(const ft_tb_writer *w) { return w->path; }

void ft_tb_close(ft_tb_writer *w)
{
    if (!w)
        return;
    if (w->f)
        fclose(w->f);
    free(w);
}

static void give_up(ft_tb_writer **w, const ft_error *err, FILE *log)
{
    if (log)
        fprintf(log, "ftmpi: tensorboard_dir: %s; no more events are written, training goes on\n",
                err->msg);
    ft_tb_close(*w);
    *w = NULL;
}

void ft_tb_log_step(ft_tb_writer **w, const ft_step_record *r, FILE *log)
{
    if (!*w)
        return;
    const ft_tb_scalar v[] = {
        { "train/loss", r->loss },
        { "train/lr", r->lr },
        { "train/grad_norm", r->grad_norm },
        { "perf/tokens_per_s", r->tokens_per_s },
        { "perf/mfu", r->mfu },
        { "perf/peak_mem_mib", r->peak_mem_mib }, /* measured on logged steps only */
        { "train/epoch", r->epoch },
    };
    ft_error err;
    ft_error_clear(&err);
    if (ft_tb_scalars(*w, r->step, ft_tb_wall_time(), v, (int)(sizeof v / sizeof v[0]), &err))
        give_up(w, &err, log);
}

void ft_tb_log_eval(ft_tb_writer **w, long step, double loss, FILE *log)
{
    if (!*w)
        return;
    const ft_tb_scalar v[] = { { "eval/loss", loss }, { "eval/ppl", exp(loss) } };
    ft_error err;
    ft_error_clear(&err);
    if (ft_tb_scalars(*w, step, ft_tb_wall_time(), v, 2, &err))
        give_up(w, &err, log);
}
