#include "train/watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct ft_watchdog {
    pthread_t thread;
    _Atomic double timeout; /* <= 0: watching no more */
    atomic_int rank;
    char host[256];
    _Atomic double last;           /* monotonic seconds of the last progress */
    _Atomic(const char *) phase;
    atomic_int stop;
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *watch(void *arg)
{
    ft_watchdog *w = arg;
    while (!atomic_load(&w->stop)) {
        struct timespec nap = { 0, 200 * 1000 * 1000 };
        nanosleep(&nap, NULL);
        const double idle = mono_now() - atomic_load(&w->last);
        const double timeout = atomic_load(&w->timeout);
        if (timeout > 0 && idle > timeout && !atomic_load(&w->stop)) {
            fprintf(stderr,
                    "ftmpi: rank %d on %s: no progress for %.0f s while %s (comm_timeout %.0f s): "
                    "another rank died or hangs; aborting\n",
                    atomic_load(&w->rank), w->host, idle, atomic_load(&w->phase), timeout);
            fflush(stderr);
            _exit(FT_EXIT_HUNG);
        }
    }
    return NULL;
}

ft_watchdog *ft_watchdog_start(double timeout, int rank)
{
    if (timeout <= 0)
        return NULL;
    ft_watchdog *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->timeout = timeout;
    w->rank = rank;
    if (gethostname(w->host, sizeof w->host - 1))
        snprintf(w->host, sizeof w->host, "unknown host");
    atomic_store(&w->last, mono_now());
    atomic_store(&w->phase, "starting");
    if (pthread_create(&w->thread, NULL, watch, w)) {
        free(w);
        return NULL;
    }
    return w;
}

void ft_watchdog_configure(ft_watchdog *w, double timeout, int rank)
{
    if (!w)
        return;
    atomic_store(&w->last, mono_now());
    atomic_store(&w->rank, rank);
    atomic_store(&w->timeout, timeout);
}

void ft_watchdog_progress(ft_watchdog *w, const char *phase)
{
    if (!w)
        return;
    atomic_store(&w->last, mono_now());
    atomic_store(&w->phase, phase);
}

void ft_watchdog_stop(ft_watchdog *w)
{
    if (!w)
        return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    free(w);
}
