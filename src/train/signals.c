#include "train/signals.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_count;
static volatile sig_atomic_t first_signal_at; /* CLOCK_MONOTONIC seconds */

/* A launcher may deliver one request twice (mpirun forwards SIGUSR1 to a rank that
 * also gets it from the process group): only a signal at least 2 s after the first
 * counts as the second. clock_gettime is async-signal-safe. */
static void on_stop_signal(int sig)
{
    (void)sig;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (stop_count == 0) {
        stop_count = 1;
        first_signal_at = (sig_atomic_t)ts.tv_sec;
        return;
    }
    if (ts.tv_sec - first_signal_at >= 2 && ++stop_count >= 2) {
        static const char msg[] = "ftmpi: second stop signal: exiting now\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(FT_EXIT_KILLED);
    }
}

void ft_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ft_signals_stop_requested(void) { return stop_count > 0; }
