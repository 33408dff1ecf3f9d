/* Where a step's time went, by phase (profile_phases = true): one line after each logged
 * step line and a "phases" record in the metrics file. */
#ifndef FT_TRAIN_STEP_PHASES_H
#define FT_TRAIN_STEP_PHASES_H

#include <stdio.h>

#include "backend/backend.h"
#include "train/metrics.h"

/* ms[FT_PHASE_COUNT]: rank 0's phases of step `step` (1-based), summed over its
 * micro-batches; step_s: the step's wall time. out or metrics may be NULL. */
void ft_step_phases_report(FILE *out, ft_metrics *metrics, long step, const double *ms,
                           double step_s, bool device_time);

#endif
