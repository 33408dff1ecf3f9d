/* Step-phase timing on the CUDA backend: cuda_phase_time.h. */
#include "cuda_phase_time.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"

/* The next event of this step, recorded on the stream now; -1 if none could be made
 * (out of host memory: the phase then goes untimed, the run goes on). */
static int record(ft_cuda_state *st)
{
    ft_cuda_phase_times *t = &st->phases;
    if (t->used == t->n_events) {
        if (t->n_events == t->cap_events) {
            const int cap = t->cap_events ? 2 * t->cap_events : 64;
            cudaEvent_t *grown = realloc(t->events, (size_t)cap * sizeof *grown);
            if (!grown)
                return -1;
            t->events = grown;
            t->cap_events = cap;
        }
        ft_cuda_check(cudaEventCreate(&t->events[t->n_events]), "phase timing (event)");
        t->n_events++;
    }
    ft_cuda_check(cudaEventRecord(t->events[t->used], st->stream), "phase timing (record)");
    return t->used++;
}

void ft_cuda_phase_begin(ft_backend *be, ft_phase p)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    st->phases.open[p] = record(st);
    st->phases.is_open[p] = 1;
}

/* Records side event `which` (0 begin, 1 end) of phase p in the set being recorded, on
 * the side stream; 0 if it could not be made (the span then goes untimed). */
static int record_side(ft_cuda_state *st, ft_phase p, int which)
{
    ft_cuda_phase_times *t = &st->phases;
    cudaEvent_t *ev = &t->side_ev[t->side_set][p][which];
    if (!*ev && cudaEventCreate(ev) != cudaSuccess) {
        *ev = NULL;
        (void)cudaGetLastError();
        return 0;
    }
    ft_cuda_check(cudaEventRecord(*ev, st->lanes.side), "phase timing (record on the side)");
    return 1;
}

void ft_cuda_phase_to_side(ft_cuda_state *st)
{
    ft_cuda_phase_times *t = &st->phases;
    for (int p = 0; p < FT_PHASE_COUNT; p++)
        if (t->is_open[p]) {
            t->is_open[p] = 0; /* the main lane's begin event is simply not used */
            t->open[p] = -1;
            t->side_open[p] = record_side(st, (ft_phase)p, 0);
        }
}

void ft_cuda_phase_end(ft_backend *be, ft_phase p)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    ft_cuda_phase_times *t = &st->phases;
    if (t->side_open[p]) {
        t->side_open[p] = 0;
        t->side_has[t->side_set][p] = record_side(st, p, 1);
        return;
    }
    const int begin = t->open[p], end = record(st);
    t->open[p] = -1;
    t->is_open[p] = 0;
    if (begin < 0 || end < 0)
        return;
    if (t->n_spans == t->cap_spans) {
        const int cap = t->cap_spans ? 2 * t->cap_spans : 64;
        ft_cuda_phase_span *grown = realloc(t->spans, (size_t)cap * sizeof *grown);
        if (!grown)
            return;
        t->spans = grown;
        t->cap_spans = cap;
    }
    t->spans[t->n_spans++] = (ft_cuda_phase_span){ p, begin, end };
}

void ft_cuda_phase_collect(ft_backend *be, double *ms)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    ft_cuda_phase_times *t = &st->phases;
    memset(ms, 0, FT_PHASE_COUNT * sizeof *ms);
    if (t->used > 0)
        ft_cuda_check(cudaEventSynchronize(t->events[t->used - 1]), "phase timing (wait)");
    for (int i = 0; i < t->n_spans; i++) {
        float span = 0.0f;
        ft_cuda_check(cudaEventElapsedTime(&span, t->events[t->spans[i].begin],
                                           t->events[t->spans[i].end]),
                      "phase timing (elapsed)");
        ms[t->spans[i].phase] += span;
    }
    t->used = 0;
    t->n_spans = 0;
    /* the side spans of the collect before; this collect's become the next one's */
    const int prev = t->side_set ^ 1;
    for (int p = 0; p < FT_PHASE_COUNT; p++) {
        if (!t->side_has[prev][p])
            continue;
        float span = 0.0f;
        ft_cuda_check(cudaEventSynchronize(t->side_ev[prev][p][1]), "phase timing (side wait)");
        ft_cuda_check(cudaEventElapsedTime(&span, t->side_ev[prev][p][0], t->side_ev[prev][p][1]),
                      "phase timing (side elapsed)");
        ms[p] += span;
        t->side_has[prev][p] = 0;
    }
    t->side_set = prev;
}

void ft_cuda_phase_times_release(ft_cuda_phase_times *t)
{
    for (int i = 0; i < t->n_events; i++)
        (void)cudaEventDestroy(t->events[i]);
    for (int set = 0; set < 2; set++)
        for (int p = 0; p < FT_PHASE_COUNT; p++)
            for (int w = 0; w < 2; w++)
                if (t->side_ev[set][p][w])
                    (void)cudaEventDestroy(t->side_ev[set][p][w]);
    free(t->events);
    free(t->spans);
    memset(t, 0, sizeof *t);
}
