/* Structured mutation of HDF5 files for the fuzzers of ftmpi's HDF5 readers.
 *
 * HDF5 1.10's own file parser crashes on some corrupted files (its bugs, not ours), so the
 * fuzzers do not feed it random bytes. Each starts from a valid file that ftmpi's own writer
 * made and lets the input describe edits made through the HDF5 API: attributes set to other
 * values and types (integers out of range, strings, arrays, NaN), attributes, groups and
 * datasets removed, datasets recreated with other ranks, shapes (including huge ones with no
 * storage) and element types, and raw bytes written into datasets. The reader under test
 * then opens the edited file. What is exercised is ftmpi's validation of attributes and
 * shapes, which is what a hostile or damaged file can get past HDF5. */
#ifndef FT_FUZZ_H5_H
#define FT_FUZZ_H5_H

#include <hdf5.h>

#include "fuzz_util.h"

typedef struct fuzz_h5_names {
    const char *const *objects; /* groups and datasets that carry attributes ("/", "/config") */
    int n_objects;
    const char *const *attrs; /* attribute names the reader looks at */
    int n_attrs;
    const char *const *datasets; /* datasets the reader opens (recreated or rewritten) */
    int n_datasets;
} fuzz_h5_names;

/* Copies the file `base` to `path` and applies the edits the input describes (at most 8).
 * Returns 0, or -1 when the edited file could not be written (skip the input). */
int fuzz_h5_mutate(const char *base, const char *path, const fuzz_h5_names *names, fuzz_bytes *in);

/* MPI_Init, then one small collective write through MPI-IO on MPI_COMM_SELF, with the leak
 * checker off: Open MPI sets up its I/O and non-blocking collective components (and PMIx,
 * hwloc) on first use and keeps allocations it no longer points to for the process's life.
 * libFuzzer's check after each input reports every unreachable block in the process, so
 * those would show up as leaks of whichever input first left a malloc unbalanced. Only
 * Open MPI's set-up is exempt: ftmpi's own writers still run with the checker on. */
void fuzz_mpi_init(int *argc, char ***argv);

/* Aborts when an HDF5 object of any file is still open: the reader under test must close
 * everything it opened, on success and on every error path. */
void fuzz_h5_check_closed(const char *what);

#endif
