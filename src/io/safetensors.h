/* safetensors files (Hugging Face), read and written as streams.
 *
 * Layout: u64 little-endian header length N, N bytes of UTF-8 JSON (an object
 * mapping tensor names to {"dtype","shape","data_offsets"} plus an optional
 * "__metadata__" string->string map), then the raw little-endian row-major tensor
 * bytes; data_offsets are relative to byte 8+N.
 *
 * The reader parses and validates the header only (the validation rules of the
 * reference implementation: sane N, JSON object, no duplicate keys, known dtypes,
 * byte size == numel x dtype size, offsets contiguous from 0 to the end of the file)
 * and then reads tensor bytes with pread on demand; it never maps or loads the
 * whole file, so memory does not grow with the file.
 *
 * The writer takes the full list of tensors up front (the header must be written
 * first), then receives the tensors' bytes in that order through any number of
 * append calls, and fsyncs at close.
 *
 * Sharded checkpoints: model.safetensors.index.json maps tensor names to shard
 * files ("weight_map"); ft_st_index_read/write handle it.
 */
#ifndef FT_IO_SAFETENSORS_H
#define FT_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define FT_ST_MAX_DIMS 8
/* The reference implementation's MAX_HEADER_SIZE. */
#define FT_ST_MAX_HEADER ((uint64_t)100000000)

typedef enum ft_st_dtype {
    FT_ST_BOOL, FT_ST_U8, FT_ST_I8, FT_ST_F8_E5M2, FT_ST_F8_E4M3, FT_ST_I16, FT_ST_U16,
    FT_ST_F16, FT_ST_BF16, FT_ST_I32, FT_ST_U32, FT_ST_F32, FT_ST_F64, FT_ST_I64, FT_ST_U64,
    FT_ST_N_DTYPES
} ft_st_dtype;

/* "F32" etc.; NULL-safe inverse returns -1 for an unknown string. */
const char *ft_st_dtype_name(ft_st_dtype d);
int ft_st_dtype_parse(const char *s);
size_t ft_st_dtype_size(ft_st_dtype d);
/* BF16, F16 or F32: the float dtypes model weights may use. */
bool ft_st_dtype_is_weight(ft_st_dtype d);

typedef struct ft_st_tensor {
    char *name; /* owned */
    ft_st_dtype dtype;
    int ndim;
    uint64_t shape[FT_ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets relative to the data section */
} ft_st_tensor;

typedef struct ft_st_file {
    int fd;
    char *path;             /* owned */
    uint64_t header_len;    /* N */
    uint64_t data_start;    /* 8 + N */
    uint64_t file_size;
    int n_tensors;
    ft_st_tensor *tensors;  /* owned, in file (offset) order */
    int *by_name;           /* owned: indices into tensors sorted by name, for lookup */
    int n_meta;
    char **meta_keys, **meta_values; /* owned, in header order */
} ft_st_file;

/* Flags for ft_st_open. */
enum {
    /* Accept every dtype of the format (for inspection); by default a tensor whose
     * dtype is not BF16/F16/F32 is an error naming it. */
    FT_ST_ANY_DTYPE = 1u << 0,
};

/* Opens and validates path. On error f is left closed (nothing to free). */
int ft_st_open(ft_st_file *f, const char *path, unsigned flags, ft_error *err);
void ft_st_close(ft_st_file *f);

/* Validates an in-memory header (N bytes of JSON) for a file of file_size bytes;
 * fills f's tensor and metadata lists (f->fd stays -1). The unit tests use it; ft_st_open
 * calls it after reading the header. `path` is only used in messages. */
int ft_st_parse_header(ft_st_file *f, const char *path, const char *json, uint64_t header_len,
                       uint64_t file_size, unsigned flags, ft_error *err);

/* The tensor named name, or NULL. */
const ft_st_tensor *ft_st_find(const ft_st_file *f, const char *name);
/* The value of metadata key, or NULL. */
const char *ft_st_meta(const ft_st_file *f, const char *key);

static inline uint64_t ft_st_tensor_bytes(const ft_st_tensor *t) { return t->end - t->begin; }
uint64_t ft_st_tensor_numel(const ft_st_tensor *t);

/* Reads n bytes of tensor t starting at byte `offset` within the tensor into buf.
 * A short read (file truncated since it was opened) is an error naming the tensor. */
int ft_st_read(const ft_st_file *f, const ft_st_tensor *t, uint64_t offset, void *buf, size_t n,
               ft_error *err);

/* ------------------------------------------------------------------ writer */

typedef struct ft_st_spec {
    const char *name; /* borrowed until ft_st_writer_open returns */
    ft_st_dtype dtype;
    int ndim;
    uint64_t shape[FT_ST_MAX_DIMS];
} ft_st_spec;

typedef struct ft_st_writer {
    int fd;
    char *path;              /* owned */
    uint64_t total;          /* data bytes the header announces */
    uint64_t written;        /* data bytes appended so far */
    uint64_t header_len;     /* N (multiple of 8 minus nothing: 8+N is a multiple of 8) */
} ft_st_writer;

/* Builds the header for specs (in that order, contiguous offsets from 0), with the
 * metadata map meta_keys[i] -> meta_values[i] (n_meta may be 0: no "__metadata__"),
 * padded with spaces so that 8+N is a multiple of 8. Returns a malloc'd buffer of
 * *len bytes holding the 8-byte length and the header, or NULL with err set. */
char *ft_st_build_header(const ft_st_spec *specs, int n, const char *const *meta_keys,
                         const char *const *meta_values, int n_meta, size_t *len,
                         ft_error *err);

/* Creates path (truncating it) and writes the header. */
int ft_st_writer_open(ft_st_writer *w, const char *path, const ft_st_spec *specs, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta,
                      ft_error *err);
/* Appends n data bytes (the tensors' bytes, in spec order, in any pieces). Writing
 * more than the header announced is an error. */
int ft_st_writer_append(ft_st_writer *w, const void *data, size_t n, ft_error *err);
/* Checks that every announced byte was written, fsyncs and closes. */
int ft_st_writer_close(ft_st_writer *w, ft_error *err);
/* Closes and removes a partly written file (after an error). */
void ft_st_writer_abort(ft_st_writer *w);

/* ------------------------------------------------------------ sharded index */

typedef struct ft_st_index {
    int n;                 /* entries of weight_map */
    char **names, **files; /* owned; files are plain file names (no directory part) */
    int n_files;
    char **unique_files;   /* owned: the distinct shard names, sorted */
} ft_st_index;

/* Reads model.safetensors.index.json; shard names must be plain file names. */
int ft_st_index_read(ft_st_index *idx, const char *path, ft_error *err);
void ft_st_index_free(ft_st_index *idx);
/* The shard file named for tensor `name`, or NULL. */
const char *ft_st_index_lookup(const ft_st_index *idx, const char *name);

/* Writes an index: {"metadata":{"total_size":T},"weight_map":{name: file, ...}}. */
int ft_st_index_write(const char *path, uint64_t total_size, const char *const *names,
                      const char *const *files, int n, ft_error *err);

#endif
