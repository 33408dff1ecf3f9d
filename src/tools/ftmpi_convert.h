/* ftmpi-convert internals shared by its subcommand files. */
#ifndef FT_TOOLS_FTMPI_CONVERT_H
#define FT_TOOLS_FTMPI_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/h5file.h"
#include "io/safetensors.h"
#include "model/layout.h"
#include "model/lora.h"
#include "util/error.h"

/* One tensor of the Hugging Face checkpoint of a model and where its elements are in
 * the ftmpi layout (ftmpi_convert_names.c): one layout tensor under the family's HF
 * name, or GPT-NeoX's fused query_key_value made of three (q, k, v). */
typedef struct cv_hf_tensor {
    char name[FT_TENSOR_NAME_MAX + 32];
    int ndim;
    uint64_t shape[2];
    uint64_t numel;
    int n_parts;    /* 1, or 3 for a fused q/k/v */
    int part[3];    /* model-wide layout tensor index of each part */
    uint64_t seg;   /* fused: elements of one head's rows of one part */
} cv_hf_tensor;

/* The model's HF tensors in layout order (*out owned by the caller, free()). */
int cv_hf_tensors(const ft_model_layout *l, cv_hf_tensor **out, int *n, ft_error *err);
/* Element e of t is element *off of layout tensor t->part[*part]; the next *run
 * elements of t (from e) are contiguous there too. */
void cv_hf_locate(const cv_hf_tensor *t, uint64_t e, int *part, uint64_t *off, uint64_t *run);
/* The name a checkpoint may use instead of one of cv_hf_tensors' (GPT-NeoX's
 * lm_head.weight for embed_out.weight, as transformers 5 saves it), or NULL. */
const char *cv_hf_alias(const ft_model_config *c, const char *name);
/* Checkpoint entries that are buffers, not weights (skipped on import). */
bool cv_hf_ignored(const char *name);

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
int cv_merge_main(int argc, char **argv);

/* Help texts (ftmpi_convert.c). */
extern const char cv_usage_main[], cv_usage_import[], cv_usage_export[], cv_usage_inspect[],
    cv_usage_merge[];

/* export's options (merge fills them for the export of its merged model). */
typedef struct cv_export_opts {
    cv_common common;
    const char *dtype; /* "auto", "bf16", "fp32" */
    uint64_t max_shard;
    const char *tokenizer;
    bool force;
    bool adapter;      /* --adapter: a PEFT adapter directory from a LoRA checkpoint */
    const char *base;  /* --base: the adapter's base_model_name_or_path */
    const char *in, *out_dir;
} cv_export_opts;

/* Parses export's (with_adapter: --adapter too) or merge's options into *o; sub and
 * usage name the command in messages and --help, operands its two arguments ("A and
 * B"). Returns 0, -1 after --help, or CV_EXIT_USAGE with the message printed. */
int cv_parse_export_opts(int argc, char **argv, const char *sub, const char *usage,
                         bool with_adapter, const char *operands, cv_export_opts *o);
/* The export of a full model (weights file or full checkpoint) to a HF directory. */
int cv_export_run(const cv_export_opts *o, uint64_t *moved, ft_error *err);
/* export --adapter (ftmpi_convert_adapter.c). */
int cv_adapter_export(const cv_export_opts *o, uint64_t *moved, ft_error *err);
/* What export and merge run on their parsed options: export's full model or adapter,
 * merge's merge-then-export. */
typedef int (*cv_export_fn)(const cv_export_opts *o, uint64_t *moved, ft_error *err);
/* The rest of export's and merge's main: o->in resolved (a checkpoint directory stands
 * for the checkpoint its `latest` names), run on it, and with --stats the closing line
 * named `what`. Returns the exit code. */
int cv_run_export(const cv_export_opts *o, const char *what, cv_export_fn run);
/* Opens a weights or checkpoint file and reads its model config. */
int cv_open_model(ft_h5file *h, const char *path, ft_model_config *c, ft_error *err);
/* Creates o->out_dir, or checks that it holds no model files (removes them with
 * o->force). */
int cv_prepare_dir(const cv_export_opts *o, ft_error *err);

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
