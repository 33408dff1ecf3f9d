/* Internals of io/hf_config.h, shared by its three files:
 *   hf_config_read.c    ft_hf_config_read: the JSON, the family, the field table's
 *                       keys, the Llama-keyed heads, head_dim, RoPE, token ids, dtype;
 *                       and the typed getters every reader uses
 *   hf_config_family.c  the per-family rules, one hf_family_adapter row each: the
 *                       keys its own readers handle, its defaults, what it adds or
 *                       forbids, what it writes derived, its constant keys
 *   hf_config_write.c   ft_hf_config_write: the entries' list, floats as JSON text
 * Nothing outside src/io/hf_config*.c includes this. */
#ifndef FT_IO_HF_CONFIG_INTERNAL_H
#define FT_IO_HF_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "io/hf_config.h"
#include "model/model_config.h"
#include "util/error.h"

/* ------------------------------------------------------------------ reading */

/* Appends note to info->notes, "; "-separated (cut at the buffer's end). */
void ft_hf_add_note(ft_hf_config_info *info, const char *note);

/* An integer field in [lo, INT_MAX]; absent or null gives *v = dflt when optional. */
int ft_hf_get_int(const char *path, const json_t *root, const char *key, bool required, int dflt,
                  int lo, int *v, ft_error *err);

/* A number field of obj, named "<where><key>" in messages (where: "", "rope_scaling." or
 * "rope_parameters."); absent or null gives *v = dflt when optional. */
int ft_hf_get_real(const char *path, const json_t *obj, const char *where, const char *key,
                   bool required, double dflt, double *v, ft_error *err);

/* ------------------------------------------------------------------ writing */

/* config.json as written: its keys with their values' JSON text, printed sorted by key
 * (as transformers' save_pretrained does; see hf_config_write.c's by_key). */
typedef struct hf_entry {
    const char *key;
    char value[256];
} hf_entry;

typedef struct hf_entries {
    hf_entry e[48];
    size_t n;
} hf_entries;

/* Adds key with the printf-formatted JSON text. The keys are a fixed few (one per
 * field plus a family's constants, under 30), so the array does not fill. */
void ft_hf_put(hf_entries *out, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds key with v as ft_hf_fmt_real's text. */
void ft_hf_put_real(hf_entries *out, const char *key, double v);

/* Shortest text that reads back as v, with a ".0" so JSON readers see a float (as
 * Python's json writes 1e-05 and 10000.0). */
void ft_hf_fmt_real(char *buf, size_t len, double v);

/* ----------------------------------------------------- the family adapters */

typedef void (*hf_writer)(hf_entries *out, const ft_model_config *c);

/* A plain field that config.json may leave out, and what its absence means. */
typedef struct hf_default {
    const char *key;
    double value;
    const char *note; /* said when the key is absent; NULL: nothing to say */
} hf_default;

typedef int (*hf_reader)(const char *path, const json_t *root, ft_model_config *c,
                         ft_hf_config_info *info, ft_error *err);

/* Each family's config.json, in one row (hf_config_family.c). The keys of ftmpi's
 * fields are the field table's (model/model_fields.h, hf_key); a row says what else
 * the family's file has. Reading (hf_config_read.c): every field with a key as its
 * plain value (read_fields: required unless `defaults` lists it), but those in `own`;
 * then the GPT families' read_shape (their GELU and rotary fields), or for the others
 * read_quirks (what the family adds or forbids) and the Llama-keyed reading of heads,
 * head_dim (with head_dim_default, 0: hidden_size / heads) and RoPE. Writing
 * (hf_config_write.c): every field that has a key, as its plain value unless
 * write_quirks gave the key a derived one, plus the constants. */
typedef struct hf_family_adapter {
    const char *const *own;
    const hf_default *defaults;
    hf_reader read_shape;
    hf_reader read_quirks;
    int head_dim_default;
    const char *head_dim_note; /* the note when head_dim_default is used */
    hf_writer write_quirks;
    const char *const *constants;
} hf_family_adapter;

/* The row of family f (one of the enum's values). */
const hf_family_adapter *ft_hf_family_adapter(ft_model_family f);

#endif
