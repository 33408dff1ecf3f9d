/* Step-phase timing on the CPU backend (backend.h, phase_begin): every op has finished
 * when it returns, so a phase's time is the wall clock between its marks. */
#include "backend/cpu/cpu_internal.h"

#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void ft_cpu_phase_begin(ft_backend *be, ft_phase p)
{
    ft_cpu_state *st = be->impl;
    st->phase_open[p] = now_ms();
}

void ft_cpu_phase_end(ft_backend *be, ft_phase p)
{
    ft_cpu_state *st = be->impl;
    st->phase_ms[p] += now_ms() - st->phase_open[p];
}

void ft_cpu_phase_collect(ft_backend *be, double *ms)
{
    ft_cpu_state *st = be->impl;
    memcpy(ms, st->phase_ms, sizeof st->phase_ms);
    memset(st->phase_ms, 0, sizeof st->phase_ms);
}
