#include "train/metrics.h"

#include <math.h>

FILE *ft_metrics_open(const char *path) { return path ? fopen(path, "a") : NULL; }

/* JSON has no NaN/Infinity: non-finite values are written as null. */
static void num(FILE *f, const char *key, double v, int last)
{
    if (isfinite(v))
        fprintf(f, "\"%s\":%.9g%s", key, v, last ? "" : ",");
    else
        fprintf(f, "\"%s\":null%s", key, last ? "" : ",");
}

void ft_metrics_step(FILE *f, const ft_step_record *r)
{
    if (!f)
        return;
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
    fflush(f);
}

void ft_metrics_eval(FILE *f, long step, double loss, long tokens)
{
    if (!f)
        return;
    fprintf(f, "{\"kind\":\"eval\",\"step\":%ld,", step);
    num(f, "loss", loss, 0);
    num(f, "ppl", exp(loss), 0);
    fprintf(f, "\"tokens\":%ld}\n", tokens);
    fflush(f);
}

void ft_metrics_values(FILE *f, const char *kind, const char *const *keys, const double *values,
                       int n)
{
    if (!f)
        return;
    fprintf(f, "{\"kind\":\"%s\"%s", kind, n ? "," : "");
    for (int i = 0; i < n; i++) /* %.17g: integers up to 2^53 print exactly */
        if (isfinite(values[i]))
            fprintf(f, "\"%s\":%.17g%s", keys[i], values[i], i == n - 1 ? "" : ",");
        else
            fprintf(f, "\"%s\":null%s", keys[i], i == n - 1 ? "" : ",");
    fprintf(f, "}\n");
    fflush(f);
}
