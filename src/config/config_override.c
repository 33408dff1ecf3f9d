/* Command-line overrides: `key=value`, applied after the file, in order.
 *
 * The value is parsed as a libconfig value by reading the string `value = <v>;`,
 * so it follows the file's syntax (1e-4, 5000000000L, true, "quoted"). A string or
 * enum key also takes a bare unquoted value literally, so `data.train=/scratch/d.h5`
 * needs no shell-escaped quotes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

static int parse_value(const ft_config_key *k, const char *value, ft_config_value *v,
                       config_t *lc, char *why, size_t why_size)
{
    size_t n = strlen(value) + sizeof "value = ;";
    char *src = malloc(n);
    if (!src) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    snprintf(src, n, "value = %s;", value);
    int ok = config_read_string(lc, src);
    free(src);
    if (!ok) {
        if (k->type == FT_KEY_STRING || k->type == FT_KEY_ENUM)
            snprintf(why, why_size, "expected a string (an unbalanced quote?)");
        else
            snprintf(why, why_size, "expected %s", ft_config_key_kind(k));
        return -1;
    }
    /* `max_steps=1; foo=2` parses as two settings: refuse anything but one value */
    const config_setting_t *root = config_root_setting(lc);
    const config_setting_t *s = config_setting_get_member(root, "value");
    if (config_setting_length(root) != 1 || !s) {
        snprintf(why, why_size, "expected a single value");
        return -1;
    }
    return ft_config_convert(k, s, value, v, why, why_size);
}

int ft_config_apply_override(ft_config_state *st, const char *kv, ft_error *err)
{
    const char *eq = strchr(kv, '=');
    if (!eq)
        return ft_fail(err, "command line: %s: expected key=value", kv);
    if (eq == kv)
        return ft_fail(err, "command line: %s: expected key=value (the key is empty)", kv);
    const char *value = eq + 1;
    if (strlen(value) > FT_CONFIG_MAX_OVERRIDE) /* libconfig's scanner is quadratic */
        return ft_fail(err, "command line: %.40s...: value longer than %d bytes", kv,
                       FT_CONFIG_MAX_OVERRIDE);
    if (*value == '\0')
        return ft_fail(err, "command line: %s: expected key=value (the value is empty)", kv);

    char key[512];
    if ((size_t)(eq - kv) >= sizeof key)
        return ft_fail(err, "command line: %.40s...: key too long", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = '\0';

    const ft_config_key *k = ft_config_find_key(key);
    if (!k) {
        char hint[512];
        if (ft_config_is_group(key))
            return ft_fail(err,
                           "command line: %s: '%s' is a group; override its keys one at a time "
                           "(%s.<key>=value)",
                           kv, key, key);
        if (ft_config_suggest(key, hint, sizeof hint))
            return ft_fail(err, "command line: %s: unknown key '%s' (did you mean '%s'?)", kv, key,
                           hint);
        return ft_fail(err, "command line: %s: unknown key '%s'", kv, key);
    }

    char why[FT_ERROR_MAX / 2];
    ft_config_value v;
    int rc;
    config_t lc;
    config_init(&lc); /* v.s may point into lc: destroyed after the store */
    if ((k->type == FT_KEY_STRING || k->type == FT_KEY_ENUM) && value[0] != '"')
        rc = ft_config_convert_string(k, value, &v, why, sizeof why);
    else
        rc = parse_value(k, value, &v, &lc, why, sizeof why);
    if (rc == 0 && ft_config_store(st->cfg, k, &v) < 0) {
        snprintf(why, sizeof why, "out of memory");
        rc = -1;
    }
    config_destroy(&lc);
    if (rc < 0)
        return ft_fail(err, "command line: %s: %s", kv, why);
    st->origin[ft_config_key_index(k)] =
        (ft_config_origin){.set = true, .file = NULL, .line = 0, .override = kv};
    return 0;
}
