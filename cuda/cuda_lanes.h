/* The CUDA backend's two lanes of work (backend.h, lane_fork): the main stream, on which
 * every op runs by default, and a side stream of lower priority, on which the optimizer's
 * update runs beside the next step's forward. st->stream (cuda_state.h) is the current
 * lane's stream and every op enqueues on it, so switching lanes is switching that one
 * handle. The main stream has the greatest priority the device offers: when both lanes
 * have blocks waiting for an SM, the forward's go first, and the update's many short
 * blocks fill what the forward leaves (GEMM tails, the SMs a small kernel leaves idle). */
#ifndef FT_CUDA_LANES_H
#define FT_CUDA_LANES_H

#include <cuda_runtime.h>

#include "backend/backend.h"

typedef struct ft_cuda_lanes {
    cudaStream_t main, side;
    cudaEvent_t fork; /* the main lane's work at the last fork */
    cudaEvent_t tail; /* the side lane's work at the last lane_await(-1) */
    cudaEvent_t *marks; /* by id, created on demand (no timing) */
    int n_marks;
    int on_side;
    void *scratch; /* the side lane's own scratch (ft_cuda_scratch), on its stream */
    size_t scratch_bytes;
} ft_cuda_lanes;

/* Creates both streams (non-blocking, the main one at the greatest priority) and the two
 * fixed events; on failure what was made is released by ft_cuda_lanes_release. */
cudaError_t ft_cuda_lanes_init(ft_cuda_lanes *l);
/* Waits for both streams, then destroys them and every event (safe on a zeroed struct). */
void ft_cuda_lanes_release(ft_cuda_lanes *l);

void ft_cuda_lane_fork(ft_backend *be, bool phases);
void ft_cuda_lane_mark(ft_backend *be, int id);
void ft_cuda_lane_join(ft_backend *be);
void ft_cuda_lane_await(ft_backend *be, int id);
void ft_cuda_lane_sync(ft_backend *be);

#endif
