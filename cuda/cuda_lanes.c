/* The CUDA backend's two lanes: cuda_lanes.h. */
#include "cuda_lanes.h"

#include <stdlib.h>

#include "cuda_state.h"

cudaError_t ft_cuda_lanes_init(ft_cuda_lanes *l)
{
    int least = 0, greatest = 0; /* numerically: greatest <= least */
    cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithPriority(&l->main, cudaStreamNonBlocking, greatest);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithPriority(&l->side, cudaStreamNonBlocking, least);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&l->fork, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&l->tail, cudaEventDisableTiming);
    return e;
}

void ft_cuda_lanes_release(ft_cuda_lanes *l)
{
    if (l->side)
        (void)cudaStreamSynchronize(l->side);
    if (l->main)
        (void)cudaStreamSynchronize(l->main);
    for (int i = 0; i < l->n_marks; i++)
        if (l->marks[i])
            (void)cudaEventDestroy(l->marks[i]);
    free(l->marks);
    if (l->fork)
        (void)cudaEventDestroy(l->fork);
    if (l->tail)
        (void)cudaEventDestroy(l->tail);
    if (l->side)
        (void)cudaStreamDestroy(l->side);
    if (l->main)
        (void)cudaStreamDestroy(l->main);
    *l = (ft_cuda_lanes){ 0 };
}

void ft_cuda_lane_fork(ft_backend *be, bool phases)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    ft_cuda_lanes *l = &st->lanes;
    if (l->on_side)
        return;
    ft_cuda_check(cudaEventRecord(l->fork, l->main), "lane_fork (record)");
    ft_cuda_check(cudaStreamWaitEvent(l->side, l->fork, 0), "lane_fork (wait)");
    if (phases) /* a phase open at the fork times the side lane's work */
        ft_cuda_phase_to_side(st);
    st->stream = l->side;
    l->on_side = 1;
}

/* The event of mark id, created on first use. */
static cudaEvent_t mark_event(ft_cuda_lanes *l, int id)
{
    if (id >= l->n_marks) {
        const int n = id + 1 > 2 * l->n_marks ? id + 1 : 2 * l->n_marks;
        cudaEvent_t *grown = realloc(l->marks, (size_t)n * sizeof *grown);
        if (!grown)
            ft_cuda_check(cudaErrorMemoryAllocation, "lane_mark (out of host memory)");
        for (int i = l->n_marks; i < n; i++)
            grown[i] = NULL;
        l->marks = grown;
        l->n_marks = n;
    }
    if (!l->marks[id])
        ft_cuda_check(cudaEventCreateWithFlags(&l->marks[id], cudaEventDisableTiming),
                      "lane_mark (event)");
    return l->marks[id];
}

void ft_cuda_lane_mark(ft_backend *be, int id)
{
    ft_cuda_lanes *l = &ft_cuda_state_of(be)->lanes;
    if (id < 0)
        ft_cuda_check(cudaErrorInvalidValue, "lane_mark (negative id)");
    ft_cuda_check(cudaEventRecord(mark_event(l, id), l->side), "lane_mark (record)");
}

void ft_cuda_lane_join(ft_backend *be)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    st->stream = st->lanes.main;
    st->lanes.on_side = 0;
}

void ft_cuda_lane_await(ft_backend *be, int id)
{
    ft_cuda_lanes *l = &ft_cuda_state_of(be)->lanes;
    cudaEvent_t ev;
    if (id < 0) {
        ft_cuda_check(cudaEventRecord(l->tail, l->side), "lane_await (record)");
        ev = l->tail;
    } else if (id < l->n_marks && l->marks[id]) {
        ev = l->marks[id];
    } else {
        return; /* never marked: nothing to wait for */
    }
    ft_cuda_check(cudaStreamWaitEvent(l->main, ev, 0), "lane_await (wait)");
}

void ft_cuda_lane_sync(ft_backend *be)
{
    ft_cuda_check(cudaStreamSynchronize(ft_cuda_state_of(be)->lanes.side), "lane_sync");
}
