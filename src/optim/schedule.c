#include "optim/schedule.h"

#include <math.h>

double ft_schedule_lr(const ft_optimizer_config *o, long step, long max_steps)
{
    const long W = o->warmup_steps;
    if (step < W)
        return o->lr * (double)(step + 1) / (double)W;
    if (o->schedule == FT_SCHED_CONSTANT || max_steps <= W)
        return o->lr;
    double p = (double)(step - W) / (double)(max_steps - W);
    if (p > 1.0)
        p = 1.0;
    double shape = o->schedule == FT_SCHED_COSINE ? 0.5 * (1.0 + cos(M_PI * p)) : 1.0 - p;
    return o->min_lr + (o->lr - o->min_lr) * shape;
}
