/* Built without CUDA: the NCCL communicator is not available. */
#include "comm/comm.h"

int ft_comm_nccl_create(ft_comm **out, struct ft_backend *be, ft_error *err)
{
    (void)be;
    *out = NULL;
    return ft_fail(err, "this ftmpi was built without CUDA/NCCL (./configure --with-cuda)");
}
