#include "train/progress.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/units.h"

ft_progress_mode ft_progress_choose(bool enabled, bool terminal, double every_s)
{
    if (!enabled)
        return FT_PROGRESS_OFF;
    if (terminal)
        return FT_PROGRESS_BAR;
    return every_s > 0 ? FT_PROGRESS_LINES : FT_PROGRESS_OFF;
}

/* Open MPI's mpirun (and its orted) sets OMPI_COMM_WORLD_SIZE and is our parent on the
 * node where it runs: its stderr is what the user sees. Elsewhere (srun, a remote
 * orted) the parent's stderr is a log or a socket, never a terminal. */
static bool launcher_stderr_is_terminal(void)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE"))
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd/2", (long)getppid());
    const int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool tty = isatty(fd) != 0;
    close(fd);
    return tty;
}

bool ft_progress_stderr_is_terminal(void)
{
    return isatty(STDERR_FILENO) || launcher_stderr_is_terminal();
}

void ft_progress_init(ft_progress *p, FILE *log, ft_progress_mode mode, double every_s,
                      double now)
{
    p->mode = log ? mode : FT_PROGRESS_OFF;
    p->log = log;
    p->every_s = every_s;
    p->last_line = now;
}

static double percent(const ft_step_record *r)
{
    return r->max_steps > 0 ? 100.0 * (double)r->step / (double)r->max_steps : 0.0;
}

static void draw_bar(const ft_step_record *r)
{
    enum { WIDTH = 28 };
    char bar[WIDTH + 1], eta[32];
    const int filled = r->max_steps > 0 ? (int)((double)WIDTH * (double)r->step /
                                                (double)r->max_steps)
                                        : 0;
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    ft_format_duration(eta, sizeof eta, r->eta_s);
    fprintf(stderr, "\r[%s] %ld/%ld %3.0f%% | loss %.4f | tok/s %.0f | eta %s\033[K", bar,
            r->step, r->max_steps, percent(r), r->loss, r->tokens_per_s, eta);
    fflush(stderr);
}

static void write_line(FILE *log, const ft_step_record *r)
{
    char eta[32], elapsed[32], epoch[48] = "";
    ft_format_duration(eta, sizeof eta, r->eta_s);
    ft_format_duration(elapsed, sizeof elapsed, r->elapsed_s);
    if (isfinite(r->epoch) && r->num_epochs > 0)
        snprintf(epoch, sizeof epoch, " | epoch %.2f/%g", r->epoch, r->num_epochs);
    fprintf(log, "progress %ld/%ld %.0f%% | loss %.4f | tok/s %.0f | elapsed %s | eta %s%s\n",
            r->step, r->max_steps, percent(r), r->loss, r->tokens_per_s, elapsed, eta, epoch);
    fflush(log);
}

void ft_progress_update(ft_progress *p, const ft_step_record *r, bool step_line, double now)
{
    switch (p->mode) {
    case FT_PROGRESS_BAR:
        draw_bar(r);
        break;
    case FT_PROGRESS_LINES:
        if (step_line)
            p->last_line = now;
        else if (now - p->last_line >= p->every_s) {
            write_line(p->log, r);
            p->last_line = now;
        }
        break;
    case FT_PROGRESS_OFF:
        break;
    }
}

void ft_progress_clear(const ft_progress *p)
{
    if (p->mode == FT_PROGRESS_BAR) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}
