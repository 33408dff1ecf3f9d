#define _GNU_SOURCE /* CLOCK_BOOTTIME */
#include "train/startup_timer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds since this process was started, from /proc/self/stat's starttime (field
 * 22, clock ticks after boot) against CLOCK_BOOTTIME; -1 where unknown. */
static double seconds_since_launch(void)
{
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return -1.0;
    char buf[1024];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name (field 2) may hold spaces and parentheses: count after the last ')' */
    const char *p = strrchr(buf, ')');
    unsigned long long start = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                            "%*d %*d %*d %llu", &start) != 1)
        return -1.0;
    const long ticks = sysconf(_SC_CLK_TCK);
    if (ticks <= 0)
        return -1.0;
    const double since = clock_seconds(CLOCK_BOOTTIME) - (double)start / (double)ticks;
    return since >= 0 ? since : -1.0;
}

void ft_startup_begin(ft_startup_timer *s)
{
    memset(s, 0, sizeof *s);
    s->last = clock_seconds(CLOCK_MONOTONIC);
    const double exec = seconds_since_launch();
    if (exec >= 0) {
        s->phase[0] = "exec";
        s->seconds[0] = exec;
        s->n = 1;
    }
}

void ft_startup_mark(ft_startup_timer *s, const char *phase)
{
    if (!s)
        return;
    const double now = clock_seconds(CLOCK_MONOTONIC);
    int i = 0;
    while (i < s->n && strcmp(s->phase[i], phase) != 0)
        i++;
    if (i == FT_STARTUP_MAX_PHASES)
        i = FT_STARTUP_MAX_PHASES - 1; /* never with ftmpi's phases: fold into the last */
    else if (i == s->n)
        s->phase[s->n++] = phase;
    s->seconds[i] += now - s->last;
    s->last = now;
}

void ft_startup_detail(ft_startup_timer *s, const char *phase, const char *detail)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->phase[i], phase) == 0) {
            snprintf(s->detail[i], sizeof s->detail[i], "%s", detail);
            return;
        }
}

void ft_startup_format(const ft_startup_timer *s, char *buf, size_t len)
{
    double total = 0.0;
    for (int i = 0; i < s->n; i++)
        total += s->seconds[i];
    /* the process's CPU time (all threads, from launch): on a shared machine the wall
     * clock says as much about the neighbours as about ftmpi */
    size_t used = (size_t)snprintf(buf, len, "start-up %.1f s (cpu %.1f s):", total,
                                   clock_seconds(CLOCK_PROCESS_CPUTIME_ID));
    for (int i = 0; i < s->n && used < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s %s %.1f s", i ? "," : "",
                                 s->phase[i], s->seconds[i]);
        if (s->detail[i][0] && used < len)
            used += (size_t)snprintf(buf + used, len - used, " (%s)", s->detail[i]);
    }
}
