/* Prints how many CUDA devices this process sees (0 where the runtime finds none), for the
 * shell tests that start one rank per device (test/cuda/devices.sh). On a GPU it is the
 * driver's count, CUDA_VISIBLE_DEVICES applied; under the CPU execution harness it is the
 * emulated count (CUDAEMU_DEVICES, default 8), so every multi-rank case runs there. */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess)
        count = 0;
    printf("%d\n", count);
    return 0;
}
