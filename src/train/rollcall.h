/* The watchdog's roll call: which ranks are missing when a collective does not complete.
 * Every rank whose watchdog fires sends "here" to every other rank on a communicator of
 * its own and listens for the others' for a grace period; a rank that is stopped, dead
 * or busy outside the stuck collective never answers, so the ranks that are alive can
 * name it. Needs MPI_THREAD_MULTIPLE (the watchdog thread makes the calls). */
#ifndef FT_TRAIN_ROLLCALL_H
#define FT_TRAIN_ROLLCALL_H

#include <mpi.h>
#include <stddef.h>

/* Writes the ranks that did not answer within grace seconds into missing ("1, 3"; ""
 * when all answered) and returns how many. comm: a duplicate used for nothing else. */
int ft_rollcall(MPI_Comm comm, double grace, char *missing, size_t len);

#endif
