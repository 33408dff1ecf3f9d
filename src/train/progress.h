/* Live progress of a training run on rank 0, where the reader can see it:
 *  - a terminal (ftmpi's stderr, or under mpirun the launcher's): one bar on stderr,
 *    rewritten every step and erased before each log line;
 *  - otherwise (mpirun or Slurm writing to a file or a pipe): a plain line in the log
 *    whenever progress_every seconds passed without a step line, so a job with a
 *    sparse log_every still shows step, %, tokens/s and ETA.
 * Nothing is drawn with progress = false; no lines with progress_every = 0. */
#ifndef FT_TRAIN_PROGRESS_H
#define FT_TRAIN_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "train/metrics.h"

typedef enum ft_progress_mode {
    FT_PROGRESS_OFF = 0,
    FT_PROGRESS_BAR,   /* on stderr, which a person is watching */
    FT_PROGRESS_LINES, /* in the log, every every_s seconds without a step line */
} ft_progress_mode;

typedef struct ft_progress {
    ft_progress_mode mode;
    FILE *log;         /* the run's log (rank 0's stdout); not owned */
    double every_s;    /* LINES: seconds between lines */
    double last_line;  /* wall time of the last step or progress line */
} ft_progress;

/* Which view a reader gets: enabled = the `progress` key; terminal = whether stderr
 * reaches a terminal (ft_progress_stderr_is_terminal). Pure, for tests. */
ft_progress_mode ft_progress_choose(bool enabled, bool terminal, double every_s);

/* Whether this process's stderr, or, when mpirun started it, the launcher's stderr
 * (ranks write to a pipe that mpirun copies to its own stderr) is a terminal. */
bool ft_progress_stderr_is_terminal(void);

/* log NULL (ranks other than 0): mode OFF. now: wall seconds at the start of training. */
void ft_progress_init(ft_progress *p, FILE *log, ft_progress_mode mode, double every_s,
                      double now);
/* After step r: redraw the bar, or write a progress line when due. step_line: a step
 * line was just written to the log (it restarts the line interval). */
void ft_progress_update(ft_progress *p, const ft_step_record *r, bool step_line, double now);
/* Erase the bar before something else is written (a log line on the same terminal). */
void ft_progress_clear(const ft_progress *p);

#endif
