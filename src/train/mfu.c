#include "train/mfu.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

long long ft_mfu_matmul_params(const ft_model_layout *l)
{
    long long n = 0;
    for (int u = 0; u < l->n_units; u++) {
        const ft_unit_layout *ul = &l->units[u];
        if (ul->kind == FT_UNIT_EMBED)
            continue; /* a lookup, no matmul */
        for (int t = 0; t < ul->n_tensors; t++)
            if (ul->tensors[t].ndim == 2)
                n += (long long)ul->tensors[t].numel;
    }
    /* a tied head multiplies by the embedding matrix, which lives in unit 0 */
    if (l->config.tie_word_embeddings)
        n += (long long)l->config.vocab_size * l->config.hidden_size;
    return n;
}

double ft_mfu_flops_per_key(const ft_model_config *c)
{
    return 12.0 * c->num_hidden_layers * c->num_attention_heads * (double)c->head_dim;
}

int64_t ft_mfu_visible_keys(const int32_t *segment, int rows, int stride, int T, int window)
{
    int64_t keys = 0;
    for (int r = 0; r < rows; r++) {
        const int32_t *seg = segment ? segment + (size_t)r * stride : NULL;
        int start = 0; /* first position of the current document, as the model finds it */
        for (int t = 0; t < T; t++) {
            if (seg && t > 0 && seg[t] != seg[t - 1])
                start = t;
            const int64_t seen = t - start + 1;
            keys += window > 0 && seen > window ? window : seen;
        }
    }
    return keys;
}

/* Half of each datasheet's "with sparsity" tensor figure, which is the dense one.
 * Order matters: the first matching row wins, so variants come before the plain name
 * ("H100 NVL" before "H100", "GH200" before "H200", "L40S" before "L40"). */
static const ft_peak_row peak_table[] = {
    { "GH200", { "GH200", NULL }, 989.5, 494.5, 67.0 },
    { "H200 NVL", { "H200", "NVL" }, 835.5, 417.5, 60.0 },
    { "H200 SXM", { "H200", NULL }, 989.5, 494.5, 67.0 },
    { "H100 NVL", { "H100", "NVL" }, 835.5, 417.5, 60.0 },
    { "H100 PCIe", { "H100", "PCIe" }, 756.5, 378.0, 51.0 },
    { "H100 SXM", { "H100", NULL }, 989.5, 494.5, 67.0 },
    { "A100 PCIe", { "A100", "PCIe" }, 312.0, 156.0, 19.5 },
    { "A100 SXM", { "A100", NULL }, 312.0, 156.0, 19.5 },
    { "L40S", { "L40S", NULL }, 362.05, 183.0, 91.6 },
    { "L40", { "L40", NULL }, 181.05, 90.5, 90.5 },
    { "GB200", { "GB200", NULL }, 2500.0, 1250.0, 80.0 },
    { "B200", { "B200", NULL }, 2250.0, 1125.0, 75.0 },
};

static bool holds_caseless(const char *s, const char *sub)
{
    const size_t n = strlen(sub);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && tolower((unsigned char)s[i]) == tolower((unsigned char)sub[i]))
            i++;
        if (i == n)
            return true;
    }
    return false;
}

const ft_peak_row *ft_mfu_peak_row(const char *device_name)
{
    if (!device_name)
        return NULL;
    for (size_t i = 0; i < sizeof peak_table / sizeof peak_table[0]; i++) {
        const ft_peak_row *r = &peak_table[i];
        if (holds_caseless(device_name, r->match[0]) &&
            (!r->match[1] || holds_caseless(device_name, r->match[1])))
            return r;
    }
    return NULL;
}

void ft_mfu_choose_peak(double peak_tflops, bool host_backend, const char *device_name,
                        ft_dtype precision, ft_peak *out)
{
    const bool bf16 = precision == FT_DTYPE_BF16;
    out->flops = 0.0;
    if (peak_tflops > 0) {
        out->flops = peak_tflops * 1e12;
        snprintf(out->source, sizeof out->source, "peak_tflops in the config");
        return;
    }
    if (host_backend) {
        /* a GEMM timed at start-up measures this moment's share of the cores (shared
         * machines, turbo, other jobs), not a peak, so the figure would not plan */
        snprintf(out->source, sizeof out->source,
                 "MFU not shown: a CPU has no datasheet peak here; set peak_tflops to the "
                 "cores' %s matmul TFLOP/s to show it", bf16 ? "bf16" : "fp32");
        return;
    }
    const ft_peak_row *row = ft_mfu_peak_row(device_name);
    if (!row) {
        snprintf(out->source, sizeof out->source,
                 "MFU not shown: device \"%s\" is not in ftmpi's peak table (train/mfu.c); "
                 "set peak_tflops to its dense %s TFLOP/s", device_name ? device_name : "?",
                 bf16 ? "bf16" : "fp32");
        return;
    }
    out->flops = (bf16 ? row->bf16 : row->fp32) * 1e12;
    snprintf(out->source, sizeof out->source, "table row %s, dense %s, for \"%s\"",
             row->label, bf16 ? "bf16" : "fp32 (no TF32)", device_name);
}
