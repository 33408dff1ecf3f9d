/* Whether the state a checkpoint would hold is finite: the fp32 master (or the fp32
 * working parameters where they are the master) and the optimizer moments over each
 * rank's optimizer range, i.e. exactly what ft_engine_save writes. A NaN or Inf makes a
 * unit's sum of squares non-finite, so one sum_squares pass per buffer (fp64 sums:
 * finite values overflow only beyond 1e154) is the whole test; the ranks then agree
 * with one all-reduce, so that every rank reaches the same verdict and names the same
 * unit. */
#include <math.h>

#include "shard/engine_internal.h"

static int unit_finite(ft_engine *e, engine_unit *eu, int *what)
{
    ft_backend *be = e->opt_be; /* master and moments live where the optimizer runs */
    const size_t n = eu->opt_end - eu->opt_begin;
    if (n == 0)
        return 1;
    const float *p = eu->master ? eu->master : (const float *)eu->full + eu->opt_begin;
    *what = 0;
    if (!isfinite(be->ops->sum_squares(be, p, n)))
        *what |= FT_ENGINE_NONFINITE_PARAMS;
    if ((eu->m && !isfinite(be->ops->sum_squares(be, eu->m, n))) ||
        (eu->v && !isfinite(be->ops->sum_squares(be, eu->v, n))))
        *what |= FT_ENGINE_NONFINITE_OPTIMIZER;
    return *what == 0;
}

int ft_engine_check_finite(ft_engine *e, ft_engine_finite *out, ft_error *err)
{
    if (e->opt.frozen)
        return ft_engine_frozen_check_finite(e, out, err);
    /* [0]: lowest bad unit as n_units - u (max-reduced), [1], [2]: what is bad, as flags */
    double v[3] = { 0.0, 0.0, 0.0 };
    for (int u = 0; u < e->layout.n_units; u++) {
        int what = 0;
        if (!unit_finite(e, &e->units[u], &what)) {
            if (v[0] == 0.0)
                v[0] = (double)(e->layout.n_units - u);
            v[1] = (what & FT_ENGINE_NONFINITE_PARAMS) ? 1.0 : v[1];
            v[2] = (what & FT_ENGINE_NONFINITE_OPTIMIZER) ? 1.0 : v[2];
        }
    }
    if (e->comm->ops->all_reduce_f64_max(e->comm, v, 3, err))
        return -1;
    out->unit = v[0] > 0.0 ? e->layout.n_units - (int)v[0] : -1;
    out->what = (v[1] > 0.0 ? FT_ENGINE_NONFINITE_PARAMS : 0) |
                (v[2] > 0.0 ? FT_ENGINE_NONFINITE_OPTIMIZER : 0);
    out->tensor = -1;
    return 0;
}
