#include "train/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ft_metrics {
    FILE *f;
    char *path;        /* owned */
    long failed_step;  /* -1, or the step of the first record that could not be written */
    int failed_errno;
};

ft_metrics *ft_metrics_open(const char *path)
{
    if (!path)
        return NULL;
    /* O_NONBLOCK: a FIFO without a reader fails at once instead of blocking rank 0;
     * with one it is refused below, as is anything but a file or a device (/dev/null).
     * O_NOFOLLOW: a symlink planted at the name is not appended through. */
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC,
                        0666);
    if (fd < 0)
        return NULL;
    struct stat st;
    ft_metrics *m = calloc(1, sizeof *m);
    if (!m || fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) ||
        fcntl(fd, F_SETFL, O_APPEND) != 0 || !(m->path = strdup(path)) ||
        !(m->f = fdopen(fd, "a"))) {
        if (m)
            free(m->path);
        free(m);
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    m->failed_step = -1;
    return m;
}

/* JSON has no NaN/Infinity: non-finite values are written as null. */
static void num(FILE *f, const char *key, double v, int last)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.9g%s", key, v, last ? "" : ",");
    else
        fprintf(f, "\"%s\":null%s", key, last ? "" : ",");
}

/* Before a record: whether to write it at all (not after a failure), and where it
 * starts, so that a failed one can be cut off whole. */
static int record_begin(ft_metrics *m, off_t *start)
{
    if (!m || m->failed_step >= 0)
        return 0;
    *start = ftello(m->f);
    return 1;
}

/* After a record: on a write error, the partial record is removed and one warning says
 * what happened. */
static void record_end(ft_metrics *m, off_t start, const char *kind, long step)
{
    if (fflush(m->f) == 0 && !ferror(m->f))
        return;
    m->failed_errno = errno ? errno : EIO;
    m->failed_step = step;
    if (start >= 0 && ftruncate(fileno(m->f), start) != 0) {
        /* the warning below is what matters */
    }
    fprintf(stderr, "ftmpi: warning: metrics_file %s: cannot write the %s record of step %ld: "
            "%s; no more records are written, and the run will end with exit status 1\n",
            m->path, kind, step, strerror(m->failed_errno));
}

void ft_metrics_step(ft_metrics *m, const ft_step_record *r)
{
    off_t start;
    if (!record_begin(m, &start))
        return;
    FILE *f = m->f;
    fprintf(f, "{\"kind\":\"step\",\"step\":%ld,\"max_steps\":%ld,", r->step, r->max_steps);
    num(f, "loss", r->loss, 0);
    num(f, "lr", r->lr, 0);
    num(f, "grad_norm", r->grad_norm, 0);
    num(f, "tokens_per_s", r->tokens_per_s, 0);
    num(f, "mfu", r->mfu, 0);
    num(f, "step_s", r->step_s, 0);
    num(f, "data_wait_s", r->data_wait_s, 0);
    num(f, "comm_wait_s", r->comm_wait_s, 0);
    num(f, "peak_mem_mib", r->peak_mem_mib, 0);
    num(f, "elapsed_s", r->elapsed_s, 0);
    num(f, "eta_s", r->eta_s, 0);
    num(f, "epoch", r->epoch, 0);
    fprintf(f, "\"comm_bytes\":%llu,\"skipped\":%s}\n", r->comm_bytes,
            r->skipped ? "true" : "false");
    record_end(m, start, "step", r->step);
}

void ft_metrics_eval(ft_metrics *m, long step, double loss, long tokens)
{
    off_t start;
    if (!record_begin(m, &start))
        return;
    fprintf(m->f, "{\"kind\":\"eval\",\"step\":%ld,", step);
    num(m->f, "loss", loss, 0);
    num(m->f, "ppl", exp(loss), 0);
    fprintf(m->f, "\"tokens\":%ld}\n", tokens);
    record_end(m, start, "eval", step);
}

void ft_metrics_values(ft_metrics *m, const char *kind, long step, const char *const *keys,
                       const double *values, int n)
{
    off_t start;
    if (!record_begin(m, &start))
        return;
    fprintf(m->f, "{\"kind\":\"%s\"%s", kind, n ? "," : "");
    for (int i = 0; i < n; i++) /* %.17g: integers up to 2^53 print exactly */
        if (isfinite(values[i]))
            fprintf(m->f, "\"%s\":%.17g%s", keys[i], values[i], i == n - 1 ? "" : ",");
        else
            fprintf(m->f, "\"%s\":null%s", keys[i], i == n - 1 ? "" : ",");
    fprintf(m->f, "}\n");
    record_end(m, start, kind, step);
}

/* Length of the well-formed UTF-8 sequence (2-4 bytes) at p, 0 when it is not one
 * (a byte-token model can emit any byte). Overlong forms are not rejected: they only
 * need to be valid JSON text, which they are. */
static size_t utf8_sequence(const char *p, size_t avail)
{
    const unsigned char c = (unsigned char)p[0];
    const size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (!len || len > avail)
        return 0;
    for (size_t k = 1; k < len; k++)
        if (((unsigned char)p[k] & 0xc0) != 0x80)
            return 0;
    return len;
}

void ft_report_sample(FILE *log, ft_metrics *m, long step, int index, int count,
                      const char *prompt, const char *text, size_t len, const char *stop)
{
    if (log) {
        fprintf(log, "sample %6ld | %d/%d | ", step, index + 1, count);
        ft_metrics_json_string(log, prompt, strlen(prompt));
        fputs(" -> ", log);
        ft_metrics_json_string(log, text, len);
        fprintf(log, " (%s)\n", stop);
        fflush(log);
    }
    ft_metrics_sample(m, step, index + 1, prompt, text, len, stop);
}

void ft_metrics_json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, f);
        else { /* a valid UTF-8 sequence passes through; a stray byte becomes U+FFFD */
            const size_t len = utf8_sequence(s + i, n - i);
            if (len) {
                fwrite(s + i, 1, len, f);
                i += len - 1;
            } else {
                fputs("\\ufffd", f);
            }
        }
    }
    fputc('"', f);
}

void ft_metrics_sample(ft_metrics *m, long step, int index, const char *prompt,
                       const char *completion, size_t completion_len, const char *stop)
{
    off_t start;
    if (!record_begin(m, &start))
        return;
    fprintf(m->f, "{\"kind\":\"sample\",\"step\":%ld,\"index\":%d,\"prompt\":", step, index);
    ft_metrics_json_string(m->f, prompt, strlen(prompt));
    fputs(",\"completion\":", m->f);
    ft_metrics_json_string(m->f, completion, completion_len);
    fprintf(m->f, ",\"stop\":\"%s\"}\n", stop);
    record_end(m, start, "sample", step);
}

int ft_metrics_finish(ft_metrics *m, ft_error *err)
{
    if (!m)
        return 0;
    /* the records were flushed one by one: a failing close has nothing of ours left
     * unwritten unless a record already failed, but is reported all the same */
    const int close_failed = fclose(m->f) != 0;
    int rc = 0;
    if (m->failed_step >= 0)
        rc = ft_fail(err, "metrics_file %s: incomplete: no records from step %ld on (%s); "
                     "training itself completed", m->path, m->failed_step,
                     strerror(m->failed_errno));
    else if (close_failed)
        rc = ft_fail(err, "metrics_file %s: error closing the file: %s", m->path,
                     strerror(errno));
    free(m->path);
    free(m);
    return rc;
}
