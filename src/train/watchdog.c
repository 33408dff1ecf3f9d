#include "train/watchdog.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "train/rollcall.h"

struct ft_watchdog {
    pthread_t thread;
    _Atomic double timeout; /* <= 0: watching no more */
    atomic_int rank;
    char host[256];
    _Atomic double last;           /* monotonic seconds of the last progress */
    _Atomic(const char *) phase;
    atomic_int stop;
    MPI_Comm rollcall;        /* valid once has_rollcall is set */
    atomic_int has_rollcall;
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
    double woke = mono_now();
    while (!atomic_load(&w->stop)) {
        struct timespec nap = { 0, 200 * 1000 * 1000 };
        nanosleep(&nap, NULL);
        /* a nap of a second or more: this process itself was stopped (SIGSTOP, frozen)
         * and has just been continued; the others are the ones to judge it, and a roll
         * call now would only find them answering */
        const double prev = woke;
        woke = mono_now();
        if (woke - prev > 1.0) {
            atomic_store(&w->last, woke);
            continue;
        }
        const double idle = mono_now() - atomic_load(&w->last);
        const double timeout = atomic_load(&w->timeout);
        if (timeout > 0 && idle > timeout && !atomic_load(&w->stop)) {
            char who[512] = "another rank died or hangs";
            if (atomic_load(&w->has_rollcall)) {
                char missing[400];
                /* long enough for the other ranks' watchdogs to fire as well */
                const double grace = timeout / 2 < 2 ? 2 : timeout / 2 > 10 ? 10 : timeout / 2;
                const int n = ft_rollcall(w->rollcall, grace, missing, sizeof missing);
                if (n > 0)
                    snprintf(who, sizeof who, "rank%s %s did not answer the roll call (stopped, "
                             "dead, or stuck outside MPI)", n > 1 ? "s" : "", missing);
                else
                    snprintf(who, sizeof who, "every rank answered the roll call: a collective "
                             "hangs (network or MPI)");
            }
            fprintf(stderr,
                    "ftmpi: rank %d on %s: no progress for %.0f s while %s (comm_timeout %.0f s): "
                    "%s; aborting\n",
                    atomic_load(&w->rank), w->host, idle, atomic_load(&w->phase), timeout, who);
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

void ft_watchdog_attach_mpi(ft_watchdog *w)
{
    int provided = 0;
    MPI_Query_thread(&provided);
    if (!w || provided < MPI_THREAD_MULTIPLE)
        return;
    MPI_Comm dup;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS) {
        w->rollcall = dup;
        atomic_store(&w->has_rollcall, 1);
    }
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
