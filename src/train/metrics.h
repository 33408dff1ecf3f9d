/* The per-run metrics file: one JSON object per line (JSONL), written by rank 0 —
 * one "step" record per optimizer step and one "eval" record per evaluation.
 *
 * A record that cannot be written (a full disk) is cut off whole, one warning line says
 * so, no later record is attempted (the file stays a valid JSONL prefix), and
 * ft_metrics_finish then fails, so the run ends with exit status 1 although training
 * itself completed. */
#ifndef FT_TRAIN_METRICS_H
#define FT_TRAIN_METRICS_H

#include <stdio.h>

#include "util/error.h"

typedef struct ft_step_record {
    long step, max_steps;
    double loss, lr, grad_norm, tokens_per_s, mfu, step_s, data_wait_s, comm_wait_s,
        peak_mem_mib, elapsed_s, eta_s;
    double epoch;      /* passes over data.train done after this step */
    double num_epochs; /* the run's length in epochs; 0 when max_steps was given */
    unsigned long long comm_bytes;
    int skipped; /* non-finite loss or gradient: no update */
} ft_step_record;

typedef struct ft_metrics ft_metrics;

/* Opens path for appending (a resumed run continues the file): a regular file or a
 * character device (/dev/null); a FIFO or directory is refused (NULL, errno set).
 * NULL path: no file (NULL). */
ft_metrics *ft_metrics_open(const char *path);
/* m may be NULL (no file): nothing is written. */
void ft_metrics_step(ft_metrics *m, const ft_step_record *r);
void ft_metrics_eval(ft_metrics *m, long step, double loss, long tokens);
/* {"kind":"sample","step":S,"index":I,"prompt":...,"completion":...,"stop":...} */
void ft_metrics_sample(ft_metrics *m, long step, int index, const char *prompt,
                       const char *completion, size_t completion_len, const char *stop);
/* {"kind":KIND,"KEY":value,...}: exact figures (byte counts) the log shows rounded;
 * step: the step it belongs to, for the warning of a failed write. */
void ft_metrics_values(ft_metrics *m, const char *kind, long step, const char *const *keys,
                       const double *values, int n);
/* s[0..n) as a JSON string literal, quotes included (control bytes as \uXXXX, a byte
 * that is not UTF-8 as U+FFFD); the log's sample lines use it too, so a completion's
 * newlines stay on one line. */
void ft_metrics_json_string(FILE *f, const char *s, size_t n);
/* A sample generation (index 0-based of count): the line "sample STEP | i/n | prompt ->
 * completion (stop)" on log and the "sample" record in m; either may be NULL. */
void ft_report_sample(FILE *log, ft_metrics *m, long step, int index, int count,
                      const char *prompt, const char *text, size_t len, const char *stop);

/* Closes the file and frees m (NULL: nothing); -1 with one line naming the file and
 * the first record lost when any record could not be written or the close failed. */
int ft_metrics_finish(ft_metrics *m, ft_error *err);

#endif
