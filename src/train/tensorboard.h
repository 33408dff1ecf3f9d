/* TensorBoard event files written natively (rank 0): a TFRecord file (io/tfrecord.h)
 * of tensorflow.Event protobufs. The first event carries file_version "brain.Event:2";
 * each later one a wall_time, a step and a Summary of scalars (simple_value), flushed
 * as it is written so TensorBoard (and `wandb sync`) see a live run.
 *
 * Only the protobuf fields written are encoded, by hand:
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
 *             Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1; float simple_value = 2; } */
#ifndef FT_TRAIN_TENSORBOARD_H
#define FT_TRAIN_TENSORBOARD_H

#include <stdio.h>

#include "util/error.h"

typedef struct ft_tb_writer ft_tb_writer;

typedef struct ft_tb_scalar {
    const char *tag;  /* "train/loss" */
    double value;     /* not finite: left out (unknown this step) */
} ft_tb_scalar;

/* Creates dir (and its parents) and dir/events.out.tfevents.<unix time>.<host> with the
 * file_version event. *w owned by the caller (ft_tb_close). */
int ft_tb_open(ft_tb_writer **w, const char *dir, ft_error *err);
/* One event at `step` holding the finite ones of v[0..n). */
int ft_tb_scalars(ft_tb_writer *w, long step, double wall_time, const ft_tb_scalar *v, int n,
                  ft_error *err);
/* The trainer's scalars: after a step (train/loss, train/lr, train/grad_norm,
 * perf/tokens_per_s, perf/mfu, perf/peak_mem_mib, train/epoch) and after an evaluation
 * (eval/loss, eval/ppl). *w NULL: nothing. A failed write (disk full) must not end the
 * training: it is reported once on `log` and *w closed and set to NULL. */
struct ft_step_record;
void ft_tb_log_step(ft_tb_writer **w, const struct ft_step_record *r, FILE *log);
void ft_tb_log_eval(ft_tb_writer **w, long step, double loss, FILE *log);
/* Seconds since the Unix epoch, an event's wall_time. */
double ft_tb_wall_time(void);

/* The file's path (for messages and tests). */
const char *ft_tb_path(const ft_tb_writer *w);
void ft_tb_close(ft_tb_writer *w);

#endif
