#include "generate/batch.h"
#include "util/input_file.h"
#include "util/output_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- input */

typedef struct batch_input {
    json_t **obj;  /* [n] */
    long *line;    /* [n] 1-based line numbers, for messages */
    long n, cap;
} batch_input;

static void input_free(batch_input *in)
{
    for (long i = 0; i < in->n; i++)
        json_decref(in->obj[i]);
    free(in->obj);
    free(in->line);
}

static int input_push(batch_input *in, json_t *obj, long line, ft_error *err)
{
    if (in->n == in->cap) {
        long cap = in->cap ? 2 * in->cap : 64;
        json_t **o = realloc(in->obj, (size_t)cap * sizeof *o);
        if (o)
            in->obj = o;
        long *l = realloc(in->line, (size_t)cap * sizeof *l);
        if (l)
            in->line = l;
        if (!o || !l)
            return ft_fail(err, "out of host memory");
        in->cap = cap;
    }
    in->obj[in->n] = obj;
    in->line[in->n++] = line;
    return 0;
}

/* Every rank reads the whole file: the objects are small next to a model, and all
 * ranks then agree on the count and on any error without communicating. */
static int read_input(const char *path, batch_input *in, ft_error *err)
{
    FILE *fp = stdin;
    if (strcmp(path, "-") != 0 && ft_input_fopen(path, "a JSONL prompts file",
                                                 FT_INPUT_UNBOUNDED, &fp, err))
        return -1;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len = 0;
    long line = 0;
    int rc = 0;
    /* bounded lines: /dev/zero on stdin ends with a line, not with memory exhausted */
    while (!rc && (len = ft_input_getline(&buf, &cap, fp, FT_INPUT_MAX_LINE)) >= 0) {
        line++;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            buf[--len] = '\0';
        if (strspn(buf, " \t") == (size_t)len)
            continue;
        json_error_t je;
        json_t *obj = json_loadb(buf, (size_t)len, 0, &je);
        if (!obj)
            rc = ft_fail(err, "%s:%ld: not valid JSON: %s", path, line, je.text);
        else if (!json_is_object(obj)) {
            json_decref(obj);
            rc = ft_fail(err, "%s:%ld: expected a JSON object like {\"prompt\": \"...\"}", path,
                         line);
        } else if (input_push(in, obj, line, err)) {
            json_decref(obj);
            rc = -1;
        }
    }
    if (!rc && len < -1)
        rc = ft_fail(err, "%s:%ld: %s", path, line + 1, len == -2 ? "a line longer than 256 MB: "
                     "not a JSONL file?" : "out of memory reading a line");
    if (!rc && ferror(fp))
        rc = ft_fail(err, "%s: read error: %s", path, strerror(errno));
    free(buf);
    if (fp != stdin)
        fclose(fp);
    if (!rc && in->n == 0)
        rc = ft_fail(err, "%s: no prompts (the file is empty)", path);
    return rc;
}

/* ---------------------------------------------------------------- output */

/* This rank's output lines, each terminated by '\n', in its prompt order. */
typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static int buf_append(text_buf *b, const char *s, size_t n, ft_error *err)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return ft_fail(err, "out of host memory");
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

static int run_local(const batch_input *in, int rank, int size, ft_batch_fn fn, void *ctx,
                     text_buf *out, ft_error *err)
{
    for (long i = rank; i < in->n; i += size) {
        json_t *res = NULL;
        if (fn(ctx, in->obj[i], i, in->line[i], &res, err))
            return -1;
        /* JSON escapes control characters, so a dump is one line */
        char *line = json_dumps(res, JSON_COMPACT);
        json_decref(res);
        if (!line)
            return ft_fail(err, "cannot encode the result of line %ld as JSON", in->line[i]);
        int rc = buf_append(out, line, strlen(line), err) || buf_append(out, "\n", 1, err);
        free(line);
        if (rc)
            return -1;
    }
    return 0;
}

/* Rank 0: writes the gathered lines in prompt order. all holds the ranks' buffers
 * back to back (lens[r] bytes each). */
static int write_output(const char *path, const char *all, const long long *lens, int size,
                        long n, ft_error *err)
{
    const char **cursor = malloc((size_t)size * sizeof *cursor);
    if (!cursor)
        return ft_fail(err, "out of host memory");
    long long off = 0;
    for (int r = 0; r < size; r++) {
        cursor[r] = all + off;
        off += lens[r];
    }
    const int to_stdout = strcmp(path, "-") == 0;
    char tmp[4200];
    FILE *fp = stdout;
    /* OUT.tmp made new: a symlink planted there is refused, not written through */
    if (!to_stdout && (ft_output_tmp_name(tmp, sizeof tmp, path, err) ||
                       ft_output_fopen_tmp(tmp, &fp, err))) {
        free(cursor);
        return -1;
    }
    for (long i = 0; i < n; i++) {
        const int r = (int)(i % size);
        const char *nl = memchr(cursor[r], '\n', (size_t)(all + off - cursor[r]));
        size_t len = (size_t)(nl - cursor[r]) + 1;
        fwrite(cursor[r], 1, len, fp);
        cursor[r] += len;
    }
    free(cursor);
    int bad = ferror(fp) != 0;
    if (to_stdout)
        bad |= fflush(fp) != 0;
    else
        bad |= fclose(fp) != 0;
    if (bad)
        return ft_fail(err, "%s: write failed: %s", to_stdout ? "stdout" : tmp, strerror(errno));
    if (!to_stdout && rename(tmp, path) != 0)
        return ft_fail(err, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    return 0;
}

/* Gathers every rank's buffer on rank 0 (counts limited to INT_MAX bytes per rank). */
static int gather_write(MPI_Comm comm, int rank, int size, const text_buf *local,
                        const char *out_path, long n, ft_error *err)
{
    long long mine = (long long)local->n;
    long long *lens = rank == 0 ? calloc((size_t)size, sizeof *lens) : NULL;
    int *counts = rank == 0 ? calloc((size_t)size, sizeof *counts) : NULL;
    int *displs = rank == 0 ? calloc((size_t)size, sizeof *displs) : NULL;
    int ok = rank != 0 || (lens && counts && displs);
    MPI_Gather(&mine, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, 0, comm);
    char *all = NULL;
    long long total = 0;
    if (rank == 0 && ok) {
        for (int r = 0; r < size; r++) {
            if (lens[r] > INT_MAX || total + lens[r] > INT_MAX)
                ok = 0;
            else {
                counts[r] = (int)lens[r];
                displs[r] = (int)total;
                total += lens[r];
            }
        }
        all = ok ? malloc((size_t)total + 1) : NULL;
        ok = ok && all;
    }
    /* everyone learns whether rank 0 can receive before sending */
    MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
    int rc = 0;
    if (ok) {
        MPI_Gatherv(local->p ? local->p : "", (int)local->n, MPI_CHAR, all, counts, displs,
                    MPI_CHAR, 0, comm);
        if (rank == 0)
            rc = write_output(out_path, all, lens, size, n, err);
    } else if (rank == 0) {
        rc = ft_fail(err, "batch output too large to gather (over 2 GiB) or out of memory");
    }
    free(all);
    free(lens);
    free(counts);
    free(displs);
    return rc;
}

int ft_batch_run(MPI_Comm comm, const char *in_path, const char *out_path, ft_batch_fn fn,
                 void *ctx, bool *report, ft_error *err)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    *report = false;
    batch_input in = { 0 };
    if (read_input(in_path, &in, err)) { /* the same on every rank: rank 0 reports */
        input_free(&in);
        *report = rank == 0;
        return -1;
    }
    text_buf local = { 0 };
    int rc = run_local(&in, rank, size, fn, ctx, &local, err);
    int any = rc != 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, comm);
    if (any) {
        *report = rc != 0;
    } else {
        rc = gather_write(comm, rank, size, &local, out_path, in.n, err);
        int failed = rc != 0; /* only rank 0 can fail here */
        MPI_Bcast(&failed, 1, MPI_INT, 0, comm);
        *report = rank == 0 && failed;
        any = failed;
    }
    free(local.p);
    input_free(&in);
    return any ? -1 : 0;
}
