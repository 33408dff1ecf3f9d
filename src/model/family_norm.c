#include "model/family_norm.h"

void ft_family_norm_fwd(ft_backend *be, const ft_model_config *c, ft_dtype dt, void *y,
                        float *mean, float *rstd, const void *x, const void *w, const void *b,
                        int rows)
{
    const float eps = (float)c->rms_norm_eps; /* the LayerNorm epsilon too (model_config.h) */
    if (ft_model_family_of(c)->layernorm)
        be->ops->layernorm_fwd(be, dt, y, mean, rstd, x, w, b, rows, c->hidden_size, eps);
    else
        be->ops->rmsnorm_fwd(be, dt, y, rstd, x, w, rows, c->hidden_size, eps);
}

void ft_family_norm_bwd(ft_backend *be, const ft_model_config *c, ft_dtype dt, ft_dtype gt,
                        void *dx, const void *dx_base, void *dw, void *db, const void *dy,
                        const void *x, const void *w, const float *mean, const float *rstd,
                        int rows)
{
    if (ft_model_family_of(c)->layernorm)
        be->ops->layernorm_bwd(be, dt, gt, dx, dx_base, dw, db, dy, x, w, mean, rstd, rows,
                               c->hidden_size);
    else
        be->ops->rmsnorm_bwd(be, dt, gt, dx, dx_base, dw, dy, x, w, rstd, rows, c->hidden_size);
}
