/* The model field table (model/model_fields.h). Row order is the attribute order of
 * weights files: keep it, or files written before and after differ in bytes. */
#include "model/model_fields.h"

#define ROW(field, type, req, omit, shape, absent)                                        \
    { #field, type, offsetof(ft_model_config, field), req, omit, shape, absent }

static const ft_model_field fields[] = {
    /*   field                    type              required omit  shape absent */
    ROW(vocab_size,              FT_FIELD_INT,     true,  false, true,  0),
    ROW(hidden_size,             FT_FIELD_INT,     true,  false, true,  0),
    ROW(intermediate_size,       FT_FIELD_INT,     true,  false, true,  0),
    ROW(num_hidden_layers,       FT_FIELD_INT,     true,  false, true,  0),
    ROW(num_attention_heads,     FT_FIELD_INT,     true,  false, true,  0),
    ROW(num_key_value_heads,     FT_FIELD_INT,     true,  false, true,  0),
    ROW(head_dim,                FT_FIELD_INT,     true,  false, true,  0),
    ROW(max_position_embeddings, FT_FIELD_INT,     true,  false, false, 0),
    ROW(tie_word_embeddings,     FT_FIELD_BOOL,    true,  false, true,  0),
    ROW(bos_token_id,            FT_FIELD_INT,     false, false, false, -1),
    ROW(eos_token_id,            FT_FIELD_INT,     false, false, false, -1),
    /* absent in files from before the families (all Llama), and kept so */
    { "model_family", FT_FIELD_FAMILY, offsetof(ft_model_config, family), false, true, true,
      FT_FAMILY_LLAMA },
    ROW(sliding_window,          FT_FIELD_INT,     false, true,  true,  0),
    /* the GPT families' switches: absent for the Llama shape */
    ROW(rotary_dim,              FT_FIELD_INT,     false, true,  true,  0),
    ROW(parallel_residual,       FT_FIELD_BOOL,    false, true,  true,  0),
    ROW(attention_bias,          FT_FIELD_BOOL,    false, true,  true,  0),
    ROW(gelu_tanh,               FT_FIELD_BOOL,    false, true,  true,  0),
    ROW(rms_norm_eps,            FT_FIELD_DOUBLE,  true,  false, false, 0),
    ROW(rope_theta,              FT_FIELD_DOUBLE,  true,  false, false, 0),
};

#undef ROW

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
