#include "io/h5file.h"

#include <fcntl.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/agree.h"
#include "util/input_file.h"
#include "util/output_file.h"

static void quiet_hdf5(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

static int make_fapl(MPI_Comm comm, hid_t *fapl)
{
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (*fapl < 0)
        return -1;
    /* Objects of 1 MiB and up start on 1 MiB boundaries, friendly to parallel file
     * system stripes; small attributes and groups are packed. */
    if (H5Pset_fapl_mpio(*fapl, comm, MPI_INFO_NULL) < 0 ||
        H5Pset_alignment(*fapl, 1 << 20, 1 << 20) < 0) {
        H5Pclose(*fapl);
        return -1;
    }
    return 0;
}

static int finish_open(ft_h5file *f, const char *path, hid_t id, int parallel, ft_error *err,
                       const char *what)
{
    if (id < 0)
        return ft_fail(err, "%s: cannot %s as HDF5 (missing, unreadable or not an HDF5 file)",
                       path, what);
    f->id = id;
    snprintf(f->path, sizeof f->path, "%s", path);
    f->dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (parallel)
        H5Pset_dxpl_mpio(f->dxpl, H5FD_MPIO_COLLECTIVE);
    return 0;
}

/* H5Fcreate(H5F_ACC_TRUNC) would follow a symlink planted at path and truncate its
 * target; so the file is first made new by one process (util/output_file.h: a leftover
 * regular file of ours is replaced, anything else refused) and HDF5 then truncates that
 * new, empty file. Every rank of comm learns the verdict before any of them calls
 * H5Fcreate, so a refusal leaves no collective half-done. */
static int make_new_file(const char *path, MPI_Comm comm, ft_error *err)
{
    int rank = 0;
    if (comm != MPI_COMM_NULL)
        MPI_Comm_rank(comm, &rank);
    int fd = -1, rc = 0;
    if (rank == 0 && (rc = ft_output_create_tmp(path, 0666, &fd, err)) == 0)
        close(fd);
    if (comm == MPI_COMM_NULL || comm == MPI_COMM_SELF)
        return rc;
    return ft_agree(comm, rc, err);
}

/* Opens (read-only) or creates (truncating) path on comm; MPI_COMM_NULL: plain POSIX
 * access by this process alone, with no MPI calls. */
static int open_or_create(ft_h5file *f, const char *path, MPI_Comm comm, int create,
                          ft_error *err)
{
    quiet_hdf5();
    memset(f, 0, sizeof *f);
    f->id = -1;
    /* what HDF5 and MPI-IO would report as pages of low-level errors (a directory gives
     * ~60 lines of mca_fbtl_posix_preadv ... Is a directory), in one line; a FIFO would
     * block every rank's open */
    if (!create) {
        int rc = ft_input_check(path, "an HDF5 file", err);
        /* every rank of a collective open sees the same file: one shared line */
        if (comm != MPI_COMM_NULL && comm != MPI_COMM_SELF)
            rc = ft_agree(comm, rc, err);
        if (rc)
            return -1;
    }
    if (create && make_new_file(path, comm, err))
        return -1;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (comm != MPI_COMM_NULL && (H5Pclose(fapl), make_fapl(comm, &fapl)))
        return ft_fail(err, "%s: cannot set up parallel HDF5 access", path);
    hid_t id = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                      : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    return finish_open(f, path, id, comm != MPI_COMM_NULL, err, create ? "create" : "open");
}

int ft_h5_open(ft_h5file *f, const char *path, MPI_Comm comm, ft_error *err)
{
    return open_or_create(f, path, comm, 0, err);
}

int ft_h5_create(ft_h5file *f, const char *path, MPI_Comm comm, ft_error *err)
{
    return open_or_create(f, path, comm, 1, err);
}

bool ft_h5_attach_raw(ft_h5file *f, MPI_Comm comm, bool writing)
{
    int ok = ft_extent_open(&f->raw, f->path, writing, true, NULL) == 0, all = ok;
    if (comm != MPI_COMM_NULL && comm != MPI_COMM_SELF)
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all) { /* the HDF5 path then serves every rank, and reports any real problem */
        ft_extent_close(f->raw, NULL);
        f->raw = NULL;
    }
    return all != 0;
}

int ft_h5_reserve(const ft_h5file *f, uint64_t extra, ft_error *err)
{
    hsize_t size = 0;
    if (H5Fget_filesize(f->id, &size) < 0)
        return ft_fail(err, "%s: cannot get the file's size", f->path);
    const off_t want = (off_t)(size + extra);
    int fd = open(f->path, O_WRONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        const int code = errno;
        if (fd >= 0)
            close(fd);
        return ft_fail(err, "%s: cannot open to allocate its space: %s", f->path,
                       strerror(code));
    }
    const int code = posix_fallocate(fd, 0, want);
    /* EINVAL/EOPNOTSUPP: a file system without allocation; the writes will tell */
    const int failed = code != 0 && code != EINVAL && code != EOPNOTSUPP;
    if (failed && ftruncate(fd, st.st_size)) {
        /* nothing more to give back: the error below is the one that matters */
    }
    close(fd);
    if (failed)
        return ft_fail(err, "%s: cannot allocate %.1f MB: %s", f->path, (double)want / 1e6,
                       strerror(code));
    return 0;
}

int ft_h5_close(ft_h5file *f, ft_error *err)
{
    /* raw writes reach the disk before HDF5 finishes the file */
    int rc = ft_extent_close(f->raw, err) ? -1 : 0;
    f->raw = NULL;
    if (f->dxpl > 0)
        H5Pclose(f->dxpl);
    if (f->id >= 0 && H5Fclose(f->id) < 0 && !rc)
        rc = ft_fail(err, "%s: error while closing (data may not be complete)", f->path);
    f->id = -1;
    f->dxpl = 0;
    return rc;
}

bool ft_h5_attr_exists(hid_t loc, const char *name) { return H5Aexists(loc, name) > 0; }

/* Whether attribute a holds exactly one element. H5Aread writes every element, so an array
 * attribute where the readers expect one value would overflow their scalar (found by
 * fuzz_h5_weights: a 2-element format_version overran an int64_t on the stack). */
static bool is_single(hid_t a)
{
    hid_t space = H5Aget_space(a);
    hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (space >= 0)
        H5Sclose(space);
    return n == 1;
}

static int attr_read(const ft_h5file *f, hid_t loc, const char *name, hid_t mem_type, void *v,
                     ft_error *err)
{
    if (!ft_h5_attr_exists(loc, name))
        return ft_fail(err, "%s: attribute '%s' is missing", f->path, name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    const bool single = a >= 0 && is_single(a);
    herr_t rc = single ? H5Aread(a, mem_type, v) : -1;
    if (a >= 0)
        H5Aclose(a);
    if (a >= 0 && !single)
        return ft_fail(err, "%s: attribute '%s' is not a single value", f->path, name);
    if (rc < 0)
        return ft_fail(err, "%s: attribute '%s' has the wrong type", f->path, name);
    return 0;
}

int ft_h5_attr_read_i64(const ft_h5file *f, hid_t loc, const char *name, int64_t *v, ft_error *err)
{
    return attr_read(f, loc, name, H5T_NATIVE_INT64, v, err);
}

int ft_h5_attr_read_f64(const ft_h5file *f, hid_t loc, const char *name, double *v, ft_error *err)
{
    return attr_read(f, loc, name, H5T_NATIVE_DOUBLE, v, err);
}

int ft_h5_attr_read_str(const ft_h5file *f, hid_t loc, const char *name, char *buf, size_t len,
                        ft_error *err)
{
    if (!ft_h5_attr_exists(loc, name))
        return ft_fail(err, "%s: attribute '%s' is missing", f->path, name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    int rc = -1;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && is_single(a)) {
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(t)); /* ASCII and UTF-8 do not convert */
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(buf, len, "%s", s);
                H5free_memory(s);
                rc = 0;
            }
            H5Tclose(mt);
        } else {
            /* on the heap: the size comes from the file */
            size_t n = H5Tget_size(t);
            char *tmp = n > 0 ? malloc(n + 1) : NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, n);
            H5Tset_cset(mt, H5Tget_cset(t));
            H5Tset_strpad(mt, H5Tget_strpad(t)); /* h5py writes NUL-padded, unterminated */
            if (tmp && H5Aread(a, mt, tmp) >= 0) {
                tmp[n] = '\0';
                snprintf(buf, len, "%s", tmp);
                rc = 0;
            }
            free(tmp);
            H5Tclose(mt);
        }
    }
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc ? ft_fail(err, "%s: attribute '%s' is not a single string", f->path, name) : 0;
}

static int attr_write(const ft_h5file *f, hid_t loc, const char *name, hid_t file_type,
                      hid_t mem_type, const void *v, ft_error *err)
{
    if (ft_h5_attr_exists(loc, name))
        H5Adelete(loc, name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mem_type, v);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    return rc < 0 ? ft_fail(err, "%s: cannot write attribute '%s'", f->path, name) : 0;
}

int ft_h5_attr_write_i64(const ft_h5file *f, hid_t loc, const char *name, int64_t v, ft_error *err)
{
    return attr_write(f, loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, err);
}

int ft_h5_attr_write_f64(const ft_h5file *f, hid_t loc, const char *name, double v, ft_error *err)
{
    return attr_write(f, loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, err);
}

int ft_h5_attr_write_str(const ft_h5file *f, hid_t loc, const char *name, const char *v,
                         ft_error *err)
{
    /* Fixed-length, NUL-padded: readable by C without HDF5's vlen memory rules. */
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(v) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    int rc = attr_write(f, loc, name, t, t, v, err);
    H5Tclose(t);
    return rc;
}

int ft_h5_check_kind(const ft_h5file *f, const char *kind, ft_error *err)
{
    char got[64];
    int64_t version;
    if (ft_h5_attr_read_str(f, f->id, "ftmpi_format", got, sizeof got, err))
        return ft_fail(err, "%s: not an ftmpi %s file (root attribute 'ftmpi_format' missing)",
                       f->path, kind);
    if (strcmp(got, kind) != 0)
        return ft_fail(err, "%s: is an ftmpi '%s' file, expected a '%s' file", f->path, got, kind);
    if (ft_h5_attr_read_i64(f, f->id, "format_version", &version, err))
        return -1;
    if (version > FT_FORMAT_VERSION || version < 1)
        return ft_fail(err, "%s: format_version %lld is not supported by this ftmpi (reads 1..%d)",
                       f->path, (long long)version, FT_FORMAT_VERSION);
    return 0;
}

int ft_h5_write_kind(const ft_h5file *f, const char *kind, ft_error *err)
{
    if (ft_h5_attr_write_str(f, f->id, "ftmpi_format", kind, err))
        return -1;
    return ft_h5_attr_write_i64(f, f->id, "format_version", FT_FORMAT_VERSION, err);
}

int ft_h5_select_flat_range(hid_t space, int rank, const hsize_t *dims, uint64_t begin,
                            uint64_t end)
{
    if (begin >= end)
        return H5Sselect_none(space) < 0 ? -1 : 0;
    if (rank == 1) {
        hsize_t start = begin, count = end - begin;
        return H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0 ? -1 : 0;
    }
    const uint64_t C = dims[1];
    uint64_t r0 = begin / C, c0 = begin % C;
    uint64_t r1 = (end - 1) / C, c1 = (end - 1) % C; /* last element, inclusive */
    H5S_seloper_t op = H5S_SELECT_SET;
    hsize_t start[2], count[2];
    if (r0 == r1) {
        start[0] = r0; start[1] = c0; count[0] = 1; count[1] = c1 - c0 + 1;
        return H5Sselect_hyperslab(space, op, start, NULL, count, NULL) < 0 ? -1 : 0;
    }
    /* partial first row, whole middle rows, partial last row */
    uint64_t mid0 = r0, mid1 = r1; /* [mid0, mid1) full rows */
    if (c0 != 0) {
        start[0] = r0; start[1] = c0; count[0] = 1; count[1] = C - c0;
        if (H5Sselect_hyperslab(space, op, start, NULL, count, NULL) < 0)
            return -1;
        op = H5S_SELECT_OR;
        mid0 = r0 + 1;
    }
    if (c1 == C - 1)
        mid1 = r1 + 1;
    if (mid1 > mid0) {
        start[0] = mid0; start[1] = 0; count[0] = mid1 - mid0; count[1] = C;
        if (H5Sselect_hyperslab(space, op, start, NULL, count, NULL) < 0)
            return -1;
        op = H5S_SELECT_OR;
    }
    if (c1 != C - 1) {
        start[0] = r1; start[1] = 0; count[0] = 1; count[1] = c1 + 1;
        if (H5Sselect_hyperslab(space, op, start, NULL, count, NULL) < 0)
            return -1;
    }
    return 0;
}
