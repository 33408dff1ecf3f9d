/* MPI-IO component choices made before MPI_Init, for every launcher (mpirun, srun,
 * singleton). Open MPI 4.1's shared-file-pointer components `lockedfile` and `sm` build
 * a lock or segment name from the file's path in a fixed buffer: a path of 245 bytes or
 * more crashes inside the first collective open (`*** buffer overflow detected ***` or
 * a segfault). ftmpi never uses shared file pointers, so excluding the two is free. */
#ifndef FT_COMM_MPI_IO_ENV_H
#define FT_COMM_MPI_IO_ENV_H

/* Sets OMPI_MCA_sharedfp=^lockedfile,sm unless the user set OMPI_MCA_sharedfp. Call
 * before MPI_Init (the MCA system reads the environment there). */
void ft_mpi_io_env_defaults(void);

#endif
