/* Step-phase timing on the CUDA backend (backend.h, phase_begin): each span is a pair of
 * events recorded on the backend's stream, so a phase's time is the device's, however
 * far ahead the host runs; the events are reused from one collect to the next. */
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
} ft_cuda_phase_times;

void ft_cuda_phase_begin(ft_backend *be, ft_phase p);
void ft_cuda_phase_end(ft_backend *be, ft_phase p);
void ft_cuda_phase_collect(ft_backend *be, double *ms);
void ft_cuda_phase_times_release(ft_cuda_phase_times *t);

#endif
