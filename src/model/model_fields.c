/* The model field table (model/model_fields.h) as the rows readers and writers walk. */
#include "model/model_fields.h"

#define HF_KEYS(...) { __VA_ARGS__ }
#define ROW(field, attr, type, req, omit, shape, absent, hf, kind, config) \
    { attr, type, offsetof(ft_model_config, field), req, omit, shape, absent, HF_KEYS hf },
static const ft_model_field fields[] = { FT_MODEL_FIELD_TABLE(ROW) };
#undef ROW
#undef HF_KEYS

const ft_model_field *ft_model_fields(size_t *n)
{
    *n = sizeof fields / sizeof fields[0];
    return fields;
}

double ft_model_field_get(const ft_model_config *c, const ft_model_field *f)
{
    const char *p = (const char *)c + f->offset;
    switch (f->type) {
    case FT_FIELD_INT: return *(const int *)p;
    case FT_FIELD_BOOL: return *(const bool *)p ? 1.0 : 0.0;
    case FT_FIELD_DOUBLE: return *(const double *)p;
    case FT_FIELD_FAMILY: return (double)*(const ft_model_family *)p;
    }
    return 0.0;
}

void ft_model_field_set(ft_model_config *c, const ft_model_field *f, double v)
{
    char *p = (char *)c + f->offset;
    switch (f->type) {
    case FT_FIELD_INT: *(int *)p = (int)v; break;
    case FT_FIELD_BOOL: *(bool *)p = v != 0.0; break;
    case FT_FIELD_DOUBLE: *(double *)p = v; break;
    case FT_FIELD_FAMILY: *(ft_model_family *)p = (ft_model_family)(int)v; break;
    }
}
