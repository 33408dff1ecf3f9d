/* The pair of backends a CUDA test compares, the CPU's and device 0's, or why not:
 * returns 0 with both made, 77 (automake's SKIP) where no CUDA device is visible, 1 when
 * a backend cannot be made (the message printed). */
#ifndef FT_TEST_CUDA_TEST_BACKENDS_H
#define FT_TEST_CUDA_TEST_BACKENDS_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdio.h>

#include "backend/backend.h"

/* Whether a CUDA device is visible; says SKIP when none is. */
static inline bool cuda_test_have_device(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return false;
    }
    return true;
}

static inline int cuda_test_backends(ft_backend **cpu, ft_backend **gpu)
{
    if (!cuda_test_have_device())
        return 77;
    ft_error err;
    ft_error_clear(&err);
    if (ft_backend_cpu_create(cpu, &err) || ft_backend_cuda_create(gpu, 0, &err)) {
        fprintf(stderr, "backends: %s\n", err.msg);
        return 1;
    }
    return 0;
}

#endif
