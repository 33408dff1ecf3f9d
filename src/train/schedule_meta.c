#include "train/schedule_meta.h"

#include <stdio.h>
#include <string.h>

#include "optim/schedule.h"

/* In ft_schedule_type order (config/run_config.h). */
static const char *const schedule_names[] = { "cosine", "linear", "constant" };

int ft_schedule_meta_write(const ft_h5file *f, hid_t meta, const ft_run_config *cfg,
                           ft_error *err)
{
    const ft_optimizer_config *o = &cfg->optimizer;
    return ft_h5_attr_write_i64(f, meta, "max_steps", cfg->max_steps, err) ||
                   ft_h5_attr_write_str(f, meta, "schedule", schedule_names[o->schedule], err) ||
                   ft_h5_attr_write_i64(f, meta, "warmup_steps", o->warmup_steps, err) ||
                   ft_h5_attr_write_f64(f, meta, "lr", o->lr, err) ||
                   ft_h5_attr_write_f64(f, meta, "min_lr", o->min_lr, err)
               ? -1
               : 0;
}

void ft_schedule_meta_read(const ft_h5file *f, hid_t meta, ft_schedule_meta *m)
{
    memset(m, 0, sizeof *m);
    static const char *const need[] = { "max_steps", "schedule", "warmup_steps", "lr", "min_lr" };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!ft_h5_attr_exists(meta, need[i]))
            return;
    ft_error err;
    ft_error_clear(&err);
    int64_t steps = 0, warmup = 0;
    char name[32];
    if (ft_h5_attr_read_i64(f, meta, "max_steps", &steps, &err) ||
        ft_h5_attr_read_i64(f, meta, "warmup_steps", &warmup, &err) ||
        ft_h5_attr_read_f64(f, meta, "lr", &m->opt.lr, &err) ||
        ft_h5_attr_read_f64(f, meta, "min_lr", &m->opt.min_lr, &err) ||
        ft_h5_attr_read_str(f, meta, "schedule", name, sizeof name, &err))
        return;
    for (int s = 0; s < (int)(sizeof schedule_names / sizeof schedule_names[0]); s++)
        if (strcmp(name, schedule_names[s]) == 0) {
            m->opt.schedule = (ft_schedule_type)s;
            m->max_steps = (long)steps;
            m->opt.warmup_steps = (long)warmup;
            m->known = true;
        }
}

/* Appends ", key a -> b" for a changed value. */
static void changed(char *buf, size_t len, const char *key, const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return;
    const size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s %s -> %s", n ? ", " : "", key, a, b);
}

bool ft_schedule_change_note(char *buf, size_t len, const ft_schedule_meta *old,
                             const ft_run_config *cfg, long step)
{
    if (!old->known || len == 0)
        return false;
    const ft_optimizer_config *o = &old->opt, *n = &cfg->optimizer;
    char keys[400] = "", a[40], b[40];
#define CHANGED_NUM(key, fmt, x, y)                                                   \
    do {                                                                              \
        snprintf(a, sizeof a, fmt, x);                                                \
        snprintf(b, sizeof b, fmt, y);                                                \
        changed(keys, sizeof keys, key, a, b);                                        \
    } while (0)
    CHANGED_NUM("max_steps", "%ld", old->max_steps, cfg->max_steps);
    changed(keys, sizeof keys, "optimizer.schedule", schedule_names[o->schedule],
            schedule_names[n->schedule]);
    CHANGED_NUM("optimizer.warmup_steps", "%ld", o->warmup_steps, n->warmup_steps);
    CHANGED_NUM("optimizer.lr", "%g", o->lr, n->lr);
    CHANGED_NUM("optimizer.min_lr", "%g", o->min_lr, n->min_lr);
#undef CHANGED_NUM
    if (!keys[0])
        return false;
    /* step = steps done: the next update is step + 1, computed at 0-based `step` */
    const double lr_old = ft_schedule_lr(o, step, old->max_steps);
    const double lr_new = ft_schedule_lr(n, step, cfg->max_steps);
    char curve[96];
    if (n->schedule == FT_SCHED_CONSTANT)
        snprintf(curve, sizeof curve, "the lr stays %g after warmup", n->lr);
    else
        snprintf(curve, sizeof curve, "the %s decay now reaches min_lr %g at step %ld",
                 schedule_names[n->schedule], n->min_lr, cfg->max_steps);
    snprintf(buf, len,
             "ftmpi: resume changes the schedule (%s): step %ld trains at lr %.3e instead of "
             "%.3e, and %s",
             keys, step + 1, lr_new, lr_old, curve);
    return true;
}
