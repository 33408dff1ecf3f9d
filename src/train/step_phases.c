/* The step's breakdown by phase: step_phases.h. */
#include "train/step_phases.h"

#include "backend/phase_time.h"

void ft_step_phases_report(FILE *out, ft_metrics *metrics, long step, const double *ms,
                           double step_s, bool device_time)
{
    double timed = 0.0;
    for (int p = 0; p < FT_PHASE_COUNT; p++)
        timed += ms[p];
    const double step_ms = step_s * 1e3;
    /* What no phase covers: staging the batch, the host's own waits and work, and on
     * a GPU the time the device sat idle between phases. */
    const double rest = step_ms > timed ? step_ms - timed : 0.0;
    if (out) {
        fprintf(out, "ftmpi: step %ld by phase (ms, %s):", step,
                device_time ? "the device's time" : "wall clock");
        for (int p = 0; p < FT_PHASE_COUNT; p++)
            fprintf(out, "%s %s %.1f", p ? " |" : "", ft_phase_name((ft_phase)p), ms[p]);
        fprintf(out, " | other %.1f of the step's %.1f\n", rest, step_ms);
    }
    static const char *const keys[FT_PHASE_COUNT + 3] = {
        "step", "forward_ms", "head_ms", "recompute_ms", "backward_ms", "reduce_ms",
        "norm_ms", "optimizer_ms", "other_ms", "step_ms"
    };
    _Static_assert(FT_PHASE_COUNT == 7, "a key per phase");
    double values[FT_PHASE_COUNT + 3];
    values[0] = (double)step;
    for (int p = 0; p < FT_PHASE_COUNT; p++)
        values[1 + p] = ms[p];
    values[FT_PHASE_COUNT + 1] = rest;
    values[FT_PHASE_COUNT + 2] = step_ms;
    ft_metrics_values(metrics, "phases", step, keys, values, FT_PHASE_COUNT + 3);
}
