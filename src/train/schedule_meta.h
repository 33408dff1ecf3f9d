/* The learning-rate schedule a checkpoint was trained under (its /meta attributes
 * max_steps, schedule, warmup_steps, lr, min_lr), and the line a resume prints when the
 * run's schedule differs: the lr curve is a function of max_steps, so a changed
 * max_steps re-stretches the decay from the resumed step on. */
#ifndef FT_TRAIN_SCHEDULE_META_H
#define FT_TRAIN_SCHEDULE_META_H

#include <stdbool.h>
#include <stddef.h>

#include "config/run_config.h"
#include "io/h5file.h"

typedef struct ft_schedule_meta {
    bool known; /* false: a checkpoint from before these attributes */
    long max_steps;
    ft_optimizer_config opt; /* lr, min_lr, schedule, warmup_steps (the rest unused) */
} ft_schedule_meta;

int ft_schedule_meta_write(const ft_h5file *f, hid_t meta, const ft_run_config *cfg,
                           ft_error *err);
/* Absent or unreadable attributes leave m->known false: the note is then skipped. */
void ft_schedule_meta_read(const ft_h5file *f, hid_t meta, ft_schedule_meta *m);

/* One line (no newline) into buf when cfg's schedule differs from the checkpoint's at
 * resume step `step` (steps done): old -> new for each changed key, the lr of the next
 * step under both, and where the decay now ends. Returns whether there is a line. */
bool ft_schedule_change_note(char *buf, size_t len, const ft_schedule_meta *old,
                             const ft_run_config *cfg, long step);

#endif
