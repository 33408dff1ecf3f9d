/* Step-phase timing on the CUDA backend (backend.h, phase_begin): each span is a pair of
 * events recorded on the backend's stream, so a phase's time is the device's, however
 * far ahead the host runs; the events are reused from one collect to the next.
 *
 * A phase open when the side lane forks (cuda_lanes.h; the optimizer's update) times the
 * side lane's work instead: from the fork to its end, both on the side stream. That
 * work runs beside the next step's forward, so waiting for it at the step's collect
 * would undo the overlap; a collect therefore reports the side spans of the collect
 * before (ready by then: the forward in between awaited them), and a step's line shows
 * the optimizer of the step before it. Two sets of side events alternate. */
#ifndef FT_CUDA_PHASE_TIME_H
#define FT_CUDA_PHASE_TIME_H

#include <cuda_runtime.h>

#include "backend/backend.h"

typedef struct ft_cuda_phase_span {
    int phase, begin, end; /* events[begin] .. events[end] */
} ft_cuda_phase_span;

typedef struct ft_cuda_phase_times {
    cudaEvent_t *events;   /* created on demand, kept for the next step */
    int n_events, cap_events, used;
    ft_cuda_phase_span *spans;
    int n_spans, cap_spans;
    int open[FT_PHASE_COUNT]; /* the event that opened each phase's current span */
    int is_open[FT_PHASE_COUNT]; /* begun on the main lane, not yet ended */
    /* side-lane spans: [set][phase][begin, end]; set `side_set` is being recorded, the
     * other holds the previous collect's */
    cudaEvent_t side_ev[2][FT_PHASE_COUNT][2];
    int side_open[FT_PHASE_COUNT];    /* begun on the side lane, not yet ended */
    int side_has[2][FT_PHASE_COUNT];  /* a complete span recorded in that set */
    int side_set;
} ft_cuda_phase_times;

void ft_cuda_phase_begin(ft_backend *be, ft_phase p);
void ft_cuda_phase_end(ft_backend *be, ft_phase p);
void ft_cuda_phase_collect(ft_backend *be, double *ms);
/* At a lane fork (st: cuda_state.h's, whose lanes.side is the side stream): moves every
 * phase open on the main lane to the side lane. */
struct ft_cuda_state;
void ft_cuda_phase_to_side(struct ft_cuda_state *st);
void ft_cuda_phase_times_release(ft_cuda_phase_times *t);

#endif
