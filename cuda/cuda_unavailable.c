/* Stand-in for the CUDA backend in a build configured without CUDA: creating it
 * fails with a message that says how to get it. */
#include "backend/backend.h"

int ft_backend_cuda_create(ft_backend **out, int device, ft_error *err)
{
    (void)device;
    *out = NULL;
    return ft_fail(err, "this ftmpi was built without CUDA (./configure --with-cuda)");
}
