#include "train/metrics.h"

#include <math.h>
#include <string.h>

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

void ft_metrics_sample(FILE *f, long step, int index, const char *prompt, const char *completion,
                       size_t completion_len, const char *stop)
{
    if (!f)
        return;
    fprintf(f, "{\"kind\":\"sample\",\"step\":%ld,\"index\":%d,\"prompt\":", step, index);
    ft_metrics_json_string(f, prompt, strlen(prompt));
    fputs(",\"completion\":", f);
    ft_metrics_json_string(f, completion, completion_len);
    fprintf(f, ",\"stop\":\"%s\"}\n", stop);
    fflush(f);
}
