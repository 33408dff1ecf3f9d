/* Parallel HDF5 helpers shared by the weights, checkpoint and dataset formats.
 *
 * Files are opened with the MPI-IO driver on a communicator; every metadata
 * operation (open, create, attribute write) must then be made by all its ranks with
 * the same arguments. HDF5's own error stack printing is turned off: failures come
 * back as one ft_error line naming the file and the object.
 */
#ifndef FT_IO_H5FILE_H
#define FT_IO_H5FILE_H

#include <hdf5.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/extent_io.h"
#include "util/error.h"

#define FT_FORMAT_VERSION 1

typedef struct ft_h5file {
    hid_t id;
    char path[1024];
    hid_t dxpl; /* collective transfer property list */
    ft_extent_io *raw; /* NULL, or this process's raw access to the datasets' bytes */
} ft_h5file;

/* Opens an existing file read-only on comm (use MPI_COMM_SELF for one process;
 * MPI_COMM_NULL for plain POSIX access that makes no MPI calls, e.g. from a thread). */
int ft_h5_open(ft_h5file *f, const char *path, MPI_Comm comm, ft_error *err);
/* Creates (truncates) a file for writing on comm. */
int ft_h5_create(ft_h5file *f, const char *path, MPI_Comm comm, ft_error *err);
/* One process (rank 0), after every dataset of f exists: allocates the file's blocks up
 * to its end of address space plus `extra` bytes for metadata still to come, so that the
 * data writes and the close cannot meet a full disk, where parallel HDF5 would leave
 * the other ranks waiting in a collective (H5Fclose). On failure the file goes back to
 * its size, so that HDF5 can still close it; the caller's ranks then agree (ft_agree)
 * and all abandon the file. A file system without allocation passes (the writes tell). */
int ft_h5_reserve(const ft_h5file *f, uint64_t extra, ft_error *err);
/* Closes the raw access (flush, fsync) if any, then the file. */
int ft_h5_close(ft_h5file *f, ft_error *err);

/* Opens raw access to f's file (io/extent_io.h): tensor transfers in io/weights.c
 * then move the bytes of contiguous datasets themselves instead of through HDF5, with
 * the aligned interior through O_DIRECT. Collective over comm (f's communicator, or
 * MPI_COMM_SELF / MPI_COMM_NULL for one process): raw access is set up on every rank
 * or, when any rank cannot open the file, on none, because the choice decides
 * whether transfers are collective HDF5 calls. Returns whether it is set up. */
bool ft_h5_attach_raw(ft_h5file *f, MPI_Comm comm, bool writing);

/* Checks the root attributes ftmpi_format == kind and format_version <= ours. */
int ft_h5_check_kind(const ft_h5file *f, const char *kind, ft_error *err);
/* Writes the root attributes ftmpi_format and format_version. */
int ft_h5_write_kind(const ft_h5file *f, const char *kind, ft_error *err);

/* Attributes on an object (loc) of file f; names the file and attribute on error. */
int ft_h5_attr_read_i64(const ft_h5file *f, hid_t loc, const char *name, int64_t *v, ft_error *err);
int ft_h5_attr_read_f64(const ft_h5file *f, hid_t loc, const char *name, double *v, ft_error *err);
/* Reads a string attribute into buf (truncated to len-1). */
int ft_h5_attr_read_str(const ft_h5file *f, hid_t loc, const char *name, char *buf, size_t len,
                        ft_error *err);
bool ft_h5_attr_exists(hid_t loc, const char *name);
int ft_h5_attr_write_i64(const ft_h5file *f, hid_t loc, const char *name, int64_t v, ft_error *err);
int ft_h5_attr_write_f64(const ft_h5file *f, hid_t loc, const char *name, double v, ft_error *err);
int ft_h5_attr_write_str(const ft_h5file *f, hid_t loc, const char *name, const char *v,
                         ft_error *err);

/* Selects the row-major flat element range [begin, end) of a dataset with the
 * given dims (rank 1 or 2) in space: the union of at most three hyperslabs, which
 * HDF5 transfers in row-major order, i.e. flat order. Empty ranges select none. */
int ft_h5_select_flat_range(hid_t space, int rank, const hsize_t *dims, uint64_t begin,
                            uint64_t end);

#endif
