#include "comm/mpi_io_env.h"

#include <stdlib.h>

void ft_mpi_io_env_defaults(void)
{
    /* 0: a setting the user made on purpose wins; other MPIs ignore the variable */
    setenv("OMPI_MCA_sharedfp", "^lockedfile,sm", 0);
}
