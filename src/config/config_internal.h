/* Internals of the config reader, shared by the files of src/config/ and its tests.
 *
 * The reader is table-driven: config_schema.c lists every key once (path, type,
 * range, default, flags, doc, offset into ft_run_config). Everything else walks
 * that table:
 *   config_value.c     one libconfig setting -> checked value -> stored in the field
 *   config_load.c      read the file, walk its tree, apply overrides, fill cfg->text
 *   config_override.c  one `key=value` from the command line
 *   config_check.c     defaults, required keys, weights-vs-shape, cross-key checks
 *   config_check_lora.c  the optional lora group and model.adapter
 *   config_lora.c      ft_run_config_lora: the lora keys against the model's family
 *   config_schema.c    the table, key/group lookup, suggestions, the reference
 */
#ifndef FT_CONFIG_INTERNAL_H
#define FT_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <libconfig.h>

#include "config/run_config.h"

typedef enum ft_key_type {
    FT_KEY_INT,    /* int field; value must fit the key's range (checked as int64) */
    FT_KEY_INT64,  /* long field */
    FT_KEY_FLOAT,  /* double field; an integer literal is accepted (`lr = 1;`) */
    FT_KEY_BOOL,   /* bool field */
    FT_KEY_STRING, /* char * field owned by cfg; optionally restricted to `choices` */
    FT_KEY_ENUM,   /* enum field (int-sized): index of the value in `choices` */
    FT_KEY_STRINGS, /* char ** field owned by cfg, NULL-terminated: ["a", "b"] */
} ft_key_type;

enum ft_key_flags {
    FT_KEY_REQUIRED = 1u << 0,       /* no default: must be given */
    FT_KEY_SHAPE = 1u << 1,          /* model shape: forbidden when model.weights is given */
    FT_KEY_SHAPE_REQUIRED = 1u << 2, /* required unless model.weights is given */
    FT_KEY_DERIVED = 1u << 3,        /* default computed from other keys (config_check.c) */
    FT_KEY_MIN_OPEN = 1u << 4,       /* float range excludes fmin */
    FT_KEY_MAX_OPEN = 1u << 5,       /* float range excludes fmax */
    /* the key's group is optional (`lora`): absent from the file and with none of its
     * keys set anywhere, the group's keys take no default and their fields stay zero
     * or NULL; present, even as `lora = { };`, they take their defaults */
    FT_KEY_OPTIONAL_GROUP = 1u << 6,
};

typedef struct ft_config_key {
    const char *path;            /* full dotted path: "optimizer.lr" */
    ft_key_type type;
    unsigned flags;              /* enum ft_key_flags */
    size_t offset;               /* offsetof(ft_run_config, field) */
    long long imin, imax;        /* FT_KEY_INT / FT_KEY_INT64 range, inclusive */
    double fmin, fmax;           /* FT_KEY_FLOAT range (HUGE_VAL: unbounded) */
    long long idef;              /* default of INT, INT64, BOOL (0/1), ENUM (index) */
    double fdef;                 /* default of FLOAT */
    const char *sdef;            /* default of STRING (NULL: unset) */
    const char *const *choices;  /* NULL-terminated: allowed STRING values / ENUM names */
    const char *default_doc;     /* FT_KEY_DERIVED: how the default is computed */
    const char *doc;             /* one line for the reference */
} ft_config_key;

extern const ft_config_key ft_config_keys[];
extern const size_t ft_config_n_keys;

/* The key with this exact path, or NULL. */
const ft_config_key *ft_config_find_key(const char *path);
/* True if `path` names a group of the schema ("model", "model.rope_scaling"). */
bool ft_config_is_group(const char *path);
/* Writes the schema key or group closest to an unknown path to out; false when
 * nothing is close enough to be worth suggesting. */
bool ft_config_suggest(const char *path, char *out, size_t out_size);

/* A value read from a setting, before it is stored; `s` points into the setting. */
typedef struct ft_config_value {
    long long i; /* INT, INT64, BOOL, ENUM index */
    double f;
    const char *s;
    const config_setting_t *list; /* STRINGS: the validated array, read by ft_config_store */
} ft_config_value;

/* Checks setting `s` against key `k` (type, range, choices) and fills `v`.
 * `literal`, if not NULL, is the value's source text; it lets integer keys catch
 * libconfig 1.5's silent truncation of literals >= 2^31 written without `L`.
 * On error writes the problem (without file/key prefix) to why and returns -1. */
int ft_config_convert(const ft_config_key *k, const config_setting_t *s, const char *literal,
                      ft_config_value *v, char *why, size_t why_size);
/* Frees a STRINGS field (NULL-terminated; NULL is fine). */
void ft_config_free_strings(char **list);
/* As above for a bare string (a STRING/ENUM override given without quotes). */
int ft_config_convert_string(const ft_config_key *k, const char *str, ft_config_value *v,
                             char *why, size_t why_size);
/* Stores v into the field of k in cfg (strdup for strings, freeing the old one). */
int ft_config_store(ft_run_config *cfg, const ft_config_key *k, const ft_config_value *v);
/* Stores the schema default of k. */
int ft_config_store_default(ft_run_config *cfg, const ft_config_key *k);
/* "an integer", "a number", ... for messages. */
const char *ft_config_setting_kind(int libconfig_type);
const char *ft_config_key_kind(const ft_config_key *k);

/* Where each key got its value, for messages after merging. */
typedef struct ft_config_origin {
    bool set;
    const char *file;     /* source file of the setting (owned by the config_t); NULL: command line */
    int line;
    const char *override; /* the `key=value` argument (owned by the caller of load) */
    bool group_present;   /* the file has the key's group (FT_KEY_OPTIONAL_GROUP), set or not */
} ft_config_origin;

typedef struct ft_config_state {
    ft_run_config *cfg;
    const char *path;     /* the config file as given */
    const char *text;     /* its contents (NUL-terminated), for integer literal checks */
    ft_config_origin *origin; /* [ft_config_n_keys], indexed like ft_config_keys */
} ft_config_state;

size_t ft_config_key_index(const ft_config_key *k);
/* Fails with the prefix that says where key k came from:
 * "file:line: key: ", "command line: key=value: " or, for a default, "file: key: ". */
int ft_config_fail_at(const ft_config_state *st, const ft_config_key *k, ft_error *err,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

int ft_config_apply_override(ft_config_state *st, const char *kv, ft_error *err);
/* Everything after the file and the overrides: required keys, weights vs shape,
 * defaults, derived values, model validation, cross-key checks. */
int ft_config_finish(ft_config_state *st, ft_error *err);
/* True when an FT_KEY_OPTIONAL_GROUP key's group is in force: the file has the group or
 * one of its keys is set (file or command line). */
bool ft_config_group_present(const ft_config_state *st, const ft_config_key *k);
/* The lora group and model.adapter after defaults (config_check_lora.c): alpha's
 * default, targets neither empty nor repeated, model.adapter only with LoRA. */
int ft_config_check_lora(ft_config_state *st, ft_error *err);

#endif
