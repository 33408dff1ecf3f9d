/* The model's scalar fields, one row each: how weights files and checkpoints name
 * them (the /config attribute), their type, the value a file without the attribute
 * means, whether a file must have it, whether it is written only when it differs
 * from that value (so files of the Llama shape keep their bytes), and whether a
 * checkpoint must match the run's value to be resumed. Readers and writers walk this
 * table instead of listing fields: adding a field is one row here plus its use
 * (doc/design.md, "Adding a model field"). The rope scaling block, a struct of its
 * own with a kind string, stays with its readers. */
#ifndef FT_MODEL_MODEL_FIELDS_H
#define FT_MODEL_MODEL_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model_config.h"

typedef enum ft_model_field_type {
    FT_FIELD_INT,    /* int; files store an integer in [-1, INT_MAX] */
    FT_FIELD_BOOL,   /* bool; files store the integer 0 or 1 */
    FT_FIELD_DOUBLE, /* double */
    FT_FIELD_FAMILY, /* ft_model_family; files store the family's name (family.h) */
} ft_model_field_type;

typedef struct ft_model_field {
    const char *attr;          /* the /config attribute */
    ft_model_field_type type;
    size_t offset;             /* in ft_model_config */
    bool required;             /* a file without it is refused */
    bool omit_when_absent;     /* written only when the value is not `absent` */
    bool shape;                /* a checkpoint of another value cannot be resumed */
    double absent;             /* the value a file without the attribute means */
} ft_model_field;

/* The table, in the order files are written; *n receives its length. */
const ft_model_field *ft_model_fields(size_t *n);

/* A field's value in c as a double (ints, bools and families are exact). */
double ft_model_field_get(const ft_model_config *c, const ft_model_field *f);
/* Stores v (already range-checked by the caller) into c's field. */
void ft_model_field_set(ft_model_config *c, const ft_model_field *f, double v);

#endif
