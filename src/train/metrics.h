/* The per-run metrics file: one JSON object per line (JSONL), written by rank 0 —
 * one "step" record per optimizer step and one "eval" record per evaluation. */
#ifndef FT_TRAIN_METRICS_H
#define FT_TRAIN_METRICS_H

#include <stdio.h>

typedef struct ft_step_record {
    long step, max_steps;
    double loss, lr, grad_norm, tokens_per_s, mfu, step_s, data_wait_s, comm_wait_s,
        peak_mem_mib, elapsed_s, eta_s;
    double epoch;      /* passes over data.train done after this step */
    double num_epochs; /* the run's length in epochs; 0 when max_steps was given */
    unsigned long long comm_bytes;
    int skipped; /* non-finite loss or gradient: no update */
} ft_step_record;

/* Opens path for appending (a resumed run continues the file); NULL path: no file. */
FILE *ft_metrics_open(const char *path);
void ft_metrics_step(FILE *f, const ft_step_record *r);
void ft_metrics_eval(FILE *f, long step, double loss, long tokens);
/* s[0..n) as a JSON string literal, quotes included (control bytes as \uXXXX); the
 * log's sample lines use it too, so a completion's newlines stay on one line. */
void ft_metrics_json_string(FILE *f, const char *s, size_t n);
/* {"kind":"sample","step":S,"index":I,"prompt":...,"completion":...,"stop":...} */
void ft_metrics_sample(FILE *f, long step, int index, const char *prompt, const char *completion,
                       size_t completion_len, const char *stop);
/* {"kind":KIND,"KEY":value,...}: exact figures (byte counts) the log shows rounded. */
void ft_metrics_values(FILE *f, const char *kind, const char *const *keys, const double *values,
                       int n);

#endif
