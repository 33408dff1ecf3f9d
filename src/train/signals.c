#include "train/signals.h"

#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_count;
static volatile sig_atomic_t first_signal_at; /* CLOCK_MONOTONIC seconds */
static volatile sig_atomic_t output_to_launcher;  /* bit 0: stdout, bit 1: stderr, not ttys */

/* After a stop signal no write to the launcher's output may block. Open MPI's mpirun
 * stops reading the ranks' output as soon as it gets SIGTERM itself, and passes the
 * signal on to the ranks only later: a rank that filled the pipe in between would sit in
 * write() (restarted by SA_RESTART) while the others wait for it in the stop agreement,
 * until mpirun's SIGKILL, and no checkpoint would be written. Non-blocking, such a write
 * fails with EAGAIN and that log line is lost instead. Switched: pipes, sockets, files,
 * and the pseudo-terminals a launcher gives its ranks (Open MPI's are ptys); not a
 * terminal of ftmpi run by hand, whose file description is shared with the user's shell.
 * fcntl is async-signal-safe. */
static void stop_blocking_on_output(void)
{
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
        if (output_to_launcher & (1 << (fd - STDOUT_FILENO))) {
            int fl = fcntl(fd, F_GETFL);
            if (fl >= 0)
                (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        }
}

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
        stop_blocking_on_output();
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
    const bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
                          getenv("PMI_RANK") || getenv("SLURM_STEP_ID");
    output_to_launcher = (launched || !isatty(STDOUT_FILENO) ? 1 : 0) |
                         (launched || !isatty(STDERR_FILENO) ? 2 : 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ft_signals_stop_requested(void) { return stop_count > 0; }
