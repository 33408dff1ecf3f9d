/* One value: libconfig setting -> type/range/choice check -> the field in cfg. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

const char *ft_config_setting_kind(int libconfig_type)
{
    switch (libconfig_type) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
    }
    return "nothing";
}

const char *ft_config_key_kind(const ft_config_key *k)
{
    switch (k->type) {
    case FT_KEY_INT:
    case FT_KEY_INT64: return "an integer";
    case FT_KEY_FLOAT: return "a number";
    case FT_KEY_BOOL: return "true or false";
    case FT_KEY_STRING:
    case FT_KEY_ENUM: return "a string";
    case FT_KEY_STRINGS: return "a list of strings [\"...\", ...]";
    }
    return "?";
}

/* `"a", "b"` for messages. */
static void format_choices(const ft_config_key *k, char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; k->choices[i] && used < n; i++) {
        int w = snprintf(out + used, n - used, "%s\"%s\"", i ? ", " : "", k->choices[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* libconfig 1.5 parses an integer literal without `L` into a 32-bit int and
 * silently wraps it (5000000000 -> 705032704; 0xFFFFFFFF -> -1), and clamps an
 * over-long `L` literal to INT64_MAX. When we have the source text, parse the
 * literal ourselves and refuse the value only when it is exactly what that
 * wrapping or clamping produces: if the text search found some other occurrence
 * of the name, the two values will not line up and no false error results. */
static int check_integer_literal(const config_setting_t *s, const char *literal, long long got,
                                 char *why, size_t why_size)
{
    if (!literal)
        return 0;
    const char *p = literal;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    const char *digits = p + (*p == '-');
    bool hex = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
    char *end;
    errno = 0;
    long long want;
    if (hex && *p != '-')
        want = (long long)strtoull(p, &end, 16); /* a bit pattern, as libconfig reads it */
    else
        want = strtoll(p, &end, hex ? 16 : 10);
    bool out_of_range = errno == ERANGE;
    if (end == p)
        return 0; /* no literal where we looked: nothing to compare */
    int len = (int)(end - p);
    if (config_setting_type(s) == CONFIG_TYPE_INT) {
        bool wrapped = (out_of_range || want < INT_MIN || want > INT_MAX) &&
                       (long long)(int32_t)(uint32_t)(unsigned long long)want == got;
        if (!wrapped)
            return 0;
        if (out_of_range)
            snprintf(why, why_size, "%.*s does not fit in a 64-bit integer", len, p);
        else
            snprintf(why, why_size,
                     "%.*s does not fit in 32 bits and libconfig would truncate it; "
                     "write it with the L suffix: %.*sL",
                     len, p, len, p);
        return -1;
    }
    if (out_of_range && (got == LLONG_MAX || got == LLONG_MIN)) {
        snprintf(why, why_size, "%.*s does not fit in a 64-bit integer", len, p);
        return -1;
    }
    return 0;
}

static int check_int_range(const ft_config_key *k, long long v, char *why, size_t why_size)
{
    if (v >= k->imin && v <= k->imax)
        return 0;
    long long type_max = k->type == FT_KEY_INT ? INT_MAX : LONG_MAX;
    if (k->imax == type_max)
        snprintf(why, why_size, "%lld is out of range (must be >= %lld)", v, k->imin);
    else
        snprintf(why, why_size, "%lld is out of range %lld..%lld", v, k->imin, k->imax);
    return -1;
}

static int check_float_range(const ft_config_key *k, double v, char *why, size_t why_size)
{
    if (!isfinite(v)) {
        snprintf(why, why_size, "%g is not a finite number", v);
        return -1;
    }
    bool lo_open = k->flags & FT_KEY_MIN_OPEN, hi_open = k->flags & FT_KEY_MAX_OPEN;
    bool ok = (lo_open ? v > k->fmin : v >= k->fmin) && (hi_open ? v < k->fmax : v <= k->fmax);
    if (ok)
        return 0;
    if (isinf(k->fmax))
        snprintf(why, why_size, "%g is out of range (must be %s %g)", v, lo_open ? ">" : ">=",
                 k->fmin);
    else
        snprintf(why, why_size, "%g is out of range (must be in %c%g, %g%c)", v, lo_open ? '(' : '[',
                 k->fmin, k->fmax, hi_open ? ')' : ']');
    return -1;
}

int ft_config_convert_string(const ft_config_key *k, const char *str, ft_config_value *v,
                             char *why, size_t why_size)
{
    if (str[0] == '\0') {
        snprintf(why, why_size, "must not be empty");
        return -1;
    }
    v->s = str;
    if (!k->choices)
        return 0;
    for (size_t i = 0; k->choices[i]; i++) {
        if (strcmp(k->choices[i], str) == 0) {
            v->i = (long long)i;
            return 0;
        }
    }
    char list[256];
    format_choices(k, list, sizeof list);
    snprintf(why, why_size, "\"%s\" is not one of %s", str, list);
    return -1;
}

int ft_config_convert(const ft_config_key *k, const config_setting_t *s, const char *literal,
                      ft_config_value *v, char *why, size_t why_size)
{
    int t = config_setting_type(s);
    memset(v, 0, sizeof *v);
    switch (k->type) {
    case FT_KEY_INT:
    case FT_KEY_INT64:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            break;
        /* read as int64 whatever the literal was, then range-check */
        v->i = config_setting_get_int64(s);
        if (check_integer_literal(s, literal, v->i, why, why_size) < 0)
            return -1;
        return check_int_range(k, v->i, why, why_size);
    case FT_KEY_FLOAT:
        if (t == CONFIG_TYPE_FLOAT)
            v->f = config_setting_get_float(s);
        else if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
            long long i = config_setting_get_int64(s);
            if (check_integer_literal(s, literal, i, why, why_size) < 0)
                return -1;
            v->f = (double)i; /* `lr = 1;` means 1.0 */
        } else
            break;
        return check_float_range(k, v->f, why, why_size);
    case FT_KEY_BOOL:
        if (t != CONFIG_TYPE_BOOL)
            break;
        v->i = config_setting_get_bool(s) != 0;
        return 0;
    case FT_KEY_STRING:
    case FT_KEY_ENUM:
        if (t != CONFIG_TYPE_STRING)
            break;
        return ft_config_convert_string(k, config_setting_get_string(s), v, why, why_size);
    case FT_KEY_STRINGS:
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            break;
        for (int i = 0; i < config_setting_length(s); i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            if (config_setting_type(e) != CONFIG_TYPE_STRING || !config_setting_get_string(e)[0]) {
                snprintf(why, why_size, "element %d is not a non-empty string", i + 1);
                return -1;
            }
        }
        v->list = s;
        return 0;
    }
    if (k->choices) {
        char list[256];
        format_choices(k, list, sizeof list);
        snprintf(why, why_size, "expected one of %s, got %s", list, ft_config_setting_kind(t));
    } else if (k->type == FT_KEY_BOOL) {
        snprintf(why, why_size, "expected true or false, got %s", ft_config_setting_kind(t));
    } else {
        snprintf(why, why_size, "expected %s, got %s", ft_config_key_kind(k),
                 ft_config_setting_kind(t));
    }
    return -1;
}

int ft_config_store(ft_run_config *cfg, const ft_config_key *k, const ft_config_value *v)
{
    void *field = (char *)cfg + k->offset;
    switch (k->type) {
    case FT_KEY_INT: *(int *)field = (int)v->i; break;       /* range already within int */
    case FT_KEY_INT64: *(long *)field = (long)v->i; break;
    case FT_KEY_FLOAT: *(double *)field = v->f; break;
    case FT_KEY_BOOL: *(bool *)field = v->i != 0; break;
    case FT_KEY_ENUM: *(int *)field = (int)v->i; break;
    case FT_KEY_STRING: {
        char *copy = NULL;
        if (v->s && !(copy = strdup(v->s)))
            return -1;
        free(*(char **)field); /* a later override replaces the file's value */
        *(char **)field = copy;
        break;
    }
    case FT_KEY_STRINGS: {
        const int n = v->list ? config_setting_length(v->list) : 0;
        char **copy = n ? calloc((size_t)n + 1, sizeof *copy) : NULL;
        if (n && !copy)
            return -1;
        for (int i = 0; i < n; i++)
            if (!(copy[i] = strdup(config_setting_get_string_elem(v->list, i)))) {
                ft_config_free_strings(copy);
                return -1;
            }
        ft_config_free_strings(*(char ***)field);
        *(char ***)field = copy;
        break;
    }
    }
    return 0;
}

int ft_config_store_default(ft_run_config *cfg, const ft_config_key *k)
{
    ft_config_value v = {.i = k->idef, .f = k->fdef, .s = k->sdef};
    return ft_config_store(cfg, k, &v);
}

void ft_config_free_strings(char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}
