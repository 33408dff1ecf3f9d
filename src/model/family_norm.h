/* The family's normalisation over rows of hidden_size (model/family.h): RMSNorm, or
 * LayerNorm with a bias for the GPT families. The one place that switches between them,
 * for the blocks and the head (model/) and for the KV-cache decoder (generate/). */
#ifndef FT_MODEL_FAMILY_NORM_H
#define FT_MODEL_FAMILY_NORM_H

#include "backend/backend.h"
#include "model/model_config.h"

/* y = Norm(x) on rows of c->hidden_size stored as dt; rstd (and, for LayerNorm, mean)
 * [rows] fp32 kept for the backward. mean and b are unused (may be NULL) for RMSNorm. */
void ft_family_norm_fwd(ft_backend *be, const ft_model_config *c, ft_dtype dt, void *y,
                        float *mean, float *rstd, const void *x, const void *w, const void *b,
                        int rows);
/* dx = dx_base + Norm^T dy (dx_base: dx itself to accumulate, another buffer, or NULL;
 * backend.h, rmsnorm_bwd); dw (and db) accumulate, stored as gt. */
void ft_family_norm_bwd(ft_backend *be, const ft_model_config *c, ft_dtype dt, ft_dtype gt,
                        void *dx, const void *dx_base, void *dw, void *db, const void *dy,
                        const void *x, const void *w, const float *mean, const float *rstd,
                        int rows);

#endif
