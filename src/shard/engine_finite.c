/* Whether the state a checkpoint would hold is finite: the fp32 master (or the fp32
 * working parameters where they are the master) and the optimizer moments over each
 * rank's optimizer range, i.e. exactly what ft_engine_save writes. A NaN or Inf makes a
 * unit's sum of squares non-finite, so one sum_squares pass per buffer (fp64 sums:
 * finite values overflow only beyond 1e154) is the whole test; the ranks then agree
 * with one all-reduce, so that every rank reaches the same verdict and names the same
 * unit.
 *
 * Only when something is found (the run is about to stop) is the first bad element
 * located, for the message: in the lowest bad unit each rank copies its optimizer range
 * of the buffers to the host a chunk at a time and scans it, and one more all-reduce
 * picks the lowest unit offset over the ranks and buffers. Every rank then maps that
 * offset to the same (tensor, element) with the unit's layout. */
#include <math.h>
#include <stdlib.h>

#include "shard/engine_internal.h"

/* The optimizer-range buffers of a unit, as check and search see them: the master (or
 * the fp32 working values that are the master), m, v; NULL where absent. */
static void opt_buffers(const engine_unit *eu, const float *buf[3])
{
    buf[0] = eu->master ? eu->master : (const float *)eu->full + eu->opt_begin;
    buf[1] = eu->m;
    buf[2] = eu->v;
}

static int unit_finite(ft_engine *e, engine_unit *eu, int *what)
{
    ft_backend *be = e->opt_be; /* master and moments live where the optimizer runs */
    const size_t n = eu->opt_end - eu->opt_begin;
    if (n == 0)
        return 1;
    const float *buf[3];
    opt_buffers(eu, buf);
    *what = 0;
    if (!isfinite(be->ops->sum_squares(be, buf[0], n)))
        *what |= FT_ENGINE_NONFINITE_PARAMS;
    if ((buf[1] && !isfinite(be->ops->sum_squares(be, buf[1], n))) ||
        (buf[2] && !isfinite(be->ops->sum_squares(be, buf[2], n))))
        *what |= FT_ENGINE_NONFINITE_OPTIMIZER;
    return *what == 0;
}

/* Elements copied to the host per download while searching: 4 MiB of staging, however
 * large the unit (a stage-0 embedding can be gigabytes). */
#define SEARCH_CHUNK ((size_t)1 << 20)

/* Index of the first non-finite value of buf[0 .. n) (memory of be), scanning no further
 * than limit; limit when there is none before it. */
static size_t first_nonfinite(ft_backend *be, const float *buf, size_t n, size_t limit,
                              float *host)
{
    if (limit > n)
        limit = n;
    for (size_t at = 0; at < limit; at += SEARCH_CHUNK) {
        const size_t len = ft_min_size(SEARCH_CHUNK, limit - at);
        be->ops->download(be, host, buf + at, len * sizeof(float));
        for (size_t i = 0; i < len; i++)
            if (!isfinite(host[i]))
                return at + i;
    }
    return limit;
}

/* Fills out->tensor and out->element for the bad unit out->unit: the lowest unit offset
 * holding NaN/Inf in any buffer of any rank. Collective. The all-reduce key is
 * numel - offset (0: none here), max-reduced; offsets are below 2^53, exact in a
 * double. When no rank finds one (sums of finite values above 1e154 overflowed), or a
 * rank could not search (no host memory for its staging: it still joins the all-reduce,
 * so that no rank waits for it), both stay -1. */
static int locate_in_unit(ft_engine *e, ft_engine_finite *out, ft_error *err)
{
    engine_unit *eu = &e->units[out->unit];
    const size_t n = eu->opt_end - eu->opt_begin;
    double v[2] = { 0.0, 0.0 }; /* the key; 1 where a rank could not search */
    out->tensor = -1;
    out->element = -1;
    float *host = n > 0 ? malloc(ft_min_size(SEARCH_CHUNK, n) * sizeof *host) : NULL;
    if (n > 0 && !host)
        v[1] = 1.0;
    else if (n > 0) {
        const float *buf[3];
        opt_buffers(eu, buf);
        size_t first = n; /* the earlier buffers' find bounds the later buffers' scans */
        for (int b = 0; b < 3; b++)
            if (buf[b])
                first = first_nonfinite(e->opt_be, buf[b], n, first, host);
        if (first < n)
            v[0] = (double)(eu->numel - (eu->opt_begin + first));
    }
    free(host);
    if (e->comm->ops->all_reduce_f64_max(e->comm, v, 2, err))
        return -1;
    if (v[0] <= 0.0 || v[1] > 0.0)
        return 0;
    const size_t offset = eu->numel - (size_t)v[0];
    const ft_unit_layout *ul = &e->layout.units[out->unit];
    for (int t = 0; t < ul->n_tensors; t++) {
        size_t lo, hi;
        if (ft_tensor_overlap(&ul->tensors[t], offset, offset + 1, &lo, &hi)) {
            out->tensor = t;
            out->element = (long long)(offset - ul->tensors[t].offset);
            break;
        }
    }
    return 0;
}

int ft_engine_check_finite(ft_engine *e, ft_engine_finite *out, ft_error *err)
{
    if (e->opt.frozen)
        return ft_engine_frozen_check_finite(e, out, err);
    ft_engine_settle_updates(e);
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
    out->element = -1;
    /* the error path only: every rank agreed on out->unit, so all take part */
    return out->unit >= 0 ? locate_in_unit(e, out, err) : 0;
}
