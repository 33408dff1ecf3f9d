/* Writing config.json on export (io/hf_config.h): the family's keys with their
 * JSON text, sorted as save_pretrained sorts them; the per-family parts come from
 * its adapter row (hf_config_family.c). */
#include "io/hf_config.h"
#include "io/hf_config_internal.h"
#include "model/model_fields.h"
#include "util/output_file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ft_hf_fmt_real(char *buf, size_t len, double v)
{
    if (v == (double)(long long)v && v > -1e16 && v < 1e16) { /* 500000.0, not 5e+05 */
        snprintf(buf, len, "%.1f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

static bool has_key(const hf_entries *out, const char *key)
{
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->e[i].key, key) == 0)
            return true;
    return false;
}

void ft_hf_put(hf_entries *out, const char *key, const char *fmt, ...)
{
    if (out->n == sizeof out->e / sizeof out->e[0])
        return;
    hf_entry *e = &out->e[out->n++];
    e->key = key;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->value, sizeof e->value, fmt, ap);
    va_end(ap);
}

void ft_hf_put_real(hf_entries *out, const char *key, double v)
{
    char buf[40];
    ft_hf_fmt_real(buf, sizeof buf, v);
    ft_hf_put(out, key, "%s", buf);
}

/* A field's plain value in config.json: an int (null where it means "none": a token id
 * of -1, a sliding window of 0), a bool, a float, or the family's model_type. */
static void put_field(hf_entries *out, const char *key, const ft_model_config *c,
                      const ft_model_field *f)
{
    const double v = ft_model_field_get(c, f);
    switch (f->type) {
    case FT_FIELD_INT:
        if (v < 0 || (f->omit_when_absent && v == f->absent))
            ft_hf_put(out, key, "null");
        else
            ft_hf_put(out, key, "%d", (int)v);
        break;
    case FT_FIELD_BOOL: ft_hf_put(out, key, "%s", v != 0.0 ? "true" : "false"); break;
    case FT_FIELD_DOUBLE: ft_hf_put_real(out, key, v); break;
    case FT_FIELD_FAMILY: ft_hf_put(out, key, "\"%s\"", ft_model_family_of(c)->name); break;
    }
}

/* Sorted by key, but "architectures" first: ftmpi's files have always begun with it
 * (GPT-J's "activation_function" sorts before it) and keep their bytes. */
static int by_key(const void *a, const void *b)
{
    const char *ka = ((const hf_entry *)a)->key, *kb = ((const hf_entry *)b)->key;
    const bool arch_a = strcmp(ka, "architectures") == 0, arch_b = strcmp(kb, "architectures") == 0;
    if (arch_a || arch_b)
        return arch_b - arch_a;
    return strcmp(ka, kb);
}

int ft_hf_config_write(const char *path, const ft_model_config *c, const char *torch_dtype,
                       ft_error *err)
{
    const hf_family_adapter *ad = ft_hf_family_adapter(c->family);
    hf_entries out = { .n = 0 };
    ft_hf_put(&out, "architectures", "[\n    \"%s\"\n  ]", ft_model_family_of(c)->architecture);
    ft_hf_put(&out, "torch_dtype", "\"%s\"", torch_dtype);
    ad->write_quirks(&out, c);
    size_t n;
    const ft_model_field *fields = ft_model_fields(&n);
    for (size_t i = 0; i < n; i++) {
        const char *key = fields[i].hf_key[c->family];
        if (key && !has_key(&out, key))
            put_field(&out, key, c, &fields[i]);
    }
    for (const char *const *k = ad->constants; *k; k += 2)
        ft_hf_put(&out, k[0], "%s", k[1]);
    qsort(out.e, out.n, sizeof out.e[0], by_key);

    FILE *fp; /* made new (util/output_file.h): never written through a planted symlink */
    if (ft_output_fopen_tmp(path, &fp, err))
        return -1;
    fprintf(fp, "{\n");
    for (size_t i = 0; i < out.n; i++)
        fprintf(fp, "  \"%s\": %s%s\n", out.e[i].key, out.e[i].value, i + 1 < out.n ? "," : "");
    fprintf(fp, "}\n");
    int bad = ferror(fp);
    bad |= fflush(fp) != 0 || fsync(fileno(fp)) != 0;
    bad |= fclose(fp) != 0;
    return bad ? ft_fail(err, "%s: write failed: %s", path, strerror(errno)) : 0;
}
