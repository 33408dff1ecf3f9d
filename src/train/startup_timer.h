/* Where start-up time goes: named phases from process launch to the first step, printed
 * as one log line ("start-up 1.9 s (cpu 2.5 s): exec 0.1 s, mpi 0.3 s, config 0.0 s,
 * ..."). */
#ifndef FT_TRAIN_STARTUP_TIMER_H
#define FT_TRAIN_STARTUP_TIMER_H

#include <stddef.h>

#define FT_STARTUP_MAX_PHASES 16

typedef struct ft_startup_timer {
    double last;                              /* monotonic seconds at the latest mark */
    int n;
    const char *phase[FT_STARTUP_MAX_PHASES]; /* string literals, not owned */
    double seconds[FT_STARTUP_MAX_PHASES];
    char detail[FT_STARTUP_MAX_PHASES][64];   /* shown in parentheses after the phase */
} ft_startup_timer;

/* Starts the clock; the time from the process's launch (the kernel's start time,
 * 10 ms resolution) to this call is phase "exec": loading the program and its
 * libraries. */
void ft_startup_begin(ft_startup_timer *s);

/* The time since the previous mark was spent in `phase` (a string literal); a name
 * marked twice adds up. s NULL: nothing. */
void ft_startup_mark(ft_startup_timer *s, const char *phase);

/* What a phase already marked was made of, printed after it: "init 5.8 s (values 0.4 s,
 * placing 5.4 s)". An unknown phase or s NULL: nothing. */
void ft_startup_detail(ft_startup_timer *s, const char *phase, const char *detail);

/* "start-up 1.9 s (cpu 2.5 s): exec 0.1 s, mpi 0.3 s, ..." into buf (truncated to
 * len); cpu: the process's CPU time so far, all threads. */
void ft_startup_format(const ft_startup_timer *s, char *buf, size_t len);

#endif
