/* Learning-rate schedules. Steps are 0-based optimizer steps s = 0 .. max_steps-1.
 *   warmup (s < W):  lr * (s + 1) / W            (never 0 at the first step)
 *   then, with progress p = (s - W) / (max_steps - W) in [0, 1):
 *     cosine:   min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
 *     linear:   min_lr + (lr - min_lr) * (1 - p)
 *     constant: lr
 */
#ifndef FT_OPTIM_SCHEDULE_H
#define FT_OPTIM_SCHEDULE_H

#include "config/run_config.h"

double ft_schedule_lr(const ft_optimizer_config *o, long step, long max_steps);

#endif
