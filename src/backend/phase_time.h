/* Marking the phases of a step (ft_phase, backend.h) where they happen, at no cost
 * unless the run asked for the breakdown (ft_backend.time_phases, set from
 * profile_phases) and the backend can time. */
#ifndef FT_BACKEND_PHASE_TIME_H
#define FT_BACKEND_PHASE_TIME_H

#include "backend/backend.h"

static inline bool ft_phase_timing(const ft_backend *be)
{
    return be->time_phases && be->ops->phase_begin;
}

static inline void ft_phase_begin(ft_backend *be, ft_phase p)
{
    if (ft_phase_timing(be))
        be->ops->phase_begin(be, p);
}

static inline void ft_phase_end(ft_backend *be, ft_phase p)
{
    if (ft_phase_timing(be))
        be->ops->phase_end(be, p);
}

/* The phases' names, for the log and the metrics file. */
static inline const char *ft_phase_name(ft_phase p)
{
    static const char *const names[FT_PHASE_COUNT] = { "forward", "head", "recompute",
                                                       "backward", "reduce", "norm",
                                                       "optimizer" };
    return names[p];
}

#endif
