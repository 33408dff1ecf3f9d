/* ftmpi-convert internals shared by its subcommand files. */
#ifndef FT_TOOLS_FTMPI_CONVERT_H
#define FT_TOOLS_FTMPI_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/h5file.h"
#include "io/safetensors.h"
#include "util/error.h"

/* Exit codes. */
enum { CV_EXIT_OK = 0, CV_EXIT_FAIL = 1, CV_EXIT_USAGE = 2 };

/* The default streaming buffer: the tool's memory does not grow with the model
 * beyond this (plus HDF5/MPI's fixed overhead and the headers). */
#define CV_DEFAULT_BUFFER ((size_t)64 << 20)

/* Options common to the subcommands. */
typedef struct cv_common {
    size_t buffer_bytes; /* --buffer-size */
    bool stats;          /* --stats: time, MB/s and peak RSS on stderr */
    bool quiet;          /* --quiet: no progress/summary lines */
} cv_common;

/* Subcommands: argc/argv start at the subcommand name. Return an exit code. */
int cv_import_main(int argc, char **argv);
int cv_export_main(int argc, char **argv);
int cv_inspect_main(int argc, char **argv);

/* Help texts (ftmpi_convert.c). */
extern const char cv_usage_main[], cv_usage_import[], cv_usage_export[], cv_usage_inspect[];
/* Prints "ftmpi-convert SUB: msg" and the hint to use --help; returns CV_EXIT_USAGE. */
int cv_usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the error line; returns CV_EXIT_FAIL. */
int cv_report(const ft_error *err);

/* Parses a size such as "5GB" (10^9), "500MiB" (2^20), "64KB", "123" (bytes). */
int cv_parse_size(const char *s, uint64_t *out);

/* --stats support: a start time, and the closing line with bytes moved. */
double cv_now(void);
void cv_print_stats(const char *what, uint64_t bytes, double t0);

/* Element conversion between BF16, F16 and F32 (n elements, src != dst buffers
 * unless the dtypes are equal). f32 -> bf16 rounds to nearest even. */
void cv_convert(ft_st_dtype from, ft_st_dtype to, const void *src, void *dst, size_t n);

/* Datatype of a /model dataset as stored: FT_ST_F32, FT_ST_BF16 (u16 + dtype
 * attribute), or -1 (other). */
int cv_h5_dataset_dtype(const ft_h5file *f, hid_t d);

/* Flat element range [lo, hi) of dataset d (rank ndim, dims) to/from buf in memory
 * type mtype (equal to the file type, so nothing converts). */
int cv_h5_transfer(const ft_h5file *f, hid_t d, const char *name, int ndim, const hsize_t *dims,
                   uint64_t lo, uint64_t hi, hid_t mtype, void *buf, bool writing, ft_error *err);

/* Elements per chunk for a tensor with `cols` elements per row so that a chunk of
 * elem_bytes-sized elements fits in `bytes`; whole rows when a row fits (one
 * hyperslab per chunk). */
size_t cv_chunk_elems(size_t bytes, size_t elem_bytes, uint64_t cols);

/* Copies file src to dst (streaming); fsyncs dst. */
int cv_copy_file(const char *src, const char *dst, ft_error *err);
bool cv_is_dir(const char *path);
bool cv_exists(const char *path);

#endif
