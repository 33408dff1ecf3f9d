#include "io/dataset.h"
#include "comm/agree.h"
#include "io/tok_fingerprint.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int read_info(ft_dataset *ds, ft_error *err)
{
    ft_h5file *f = &ds->file;
    ft_dataset_info *in = &ds->info;
    int64_t v;
    /* Range-checked before narrowing: an int field must not silently wrap (seq_len
     * 2^32+8 read as 8), and seq_len + 1, the row width used everywhere, must fit an int
     * (fuzz_h5_dataset: seq_len = INT_MAX overflowed, UBSan). */
#define INT_ATTR(name, field, lo, hi)                                                       \
    do {                                                                                    \
        if (ft_h5_attr_read_i64(f, f->id, name, &v, err))                                   \
            return -1;                                                                      \
        if (v < (int64_t)(lo) || v > (int64_t)(hi))                                         \
            return ft_fail(err, "%s: attribute %s = %lld is out of range %lld..%lld", f->path, \
                           name, (long long)v, (long long)(lo), (long long)(hi));           \
        field = v;                                                                          \
    } while (0)
    INT_ATTR("seq_len", in->seq_len, 1, INT_MAX - 1);
    INT_ATTR("vocab_size", in->vocab_size, 1, INT_MAX);
    INT_ATTR("bos_token_id", in->bos_token_id, -1, INT_MAX);
    INT_ATTR("eos_token_id", in->eos_token_id, -1, INT_MAX);
    INT_ATTR("pad_token_id", in->pad_token_id, -1, INT_MAX);
    INT_ATTR("n_documents", in->n_documents, 0, INT64_MAX);
    INT_ATTR("n_target_tokens", in->n_target_tokens, 0, INT64_MAX);
#undef INT_ATTR
    if (ft_h5_attr_read_str(f, f->id, "tokenizer_hash", in->tokenizer_hash,
                            sizeof in->tokenizer_hash, err) ||
        ft_h5_attr_read_str(f, f->id, "template", in->template_name, sizeof in->template_name,
                            err) ||
        ft_tok_fingerprint_read(f, in->tokenizer_fingerprint, err))
        return -1;
    if (in->seq_len < 1 || in->vocab_size < 1)
        return ft_fail(err, "%s: seq_len %d / vocab_size %d must be positive", f->path,
                       in->seq_len, in->vocab_size);
    if (in->n_target_tokens <= 0)
        return ft_fail(err, "%s: no target tokens (n_target_tokens %lld: every loss_mask is 0), "
                       "nothing to learn from; check how the file was made", f->path,
                       (long long)in->n_target_tokens);
    return 0;
}

/* Opens one of the three row datasets and checks it is [rows, seq_len+1] of the
 * expected class and size. */
static hid_t open_rows(ft_dataset *ds, const char *name, H5T_class_t cls, size_t size,
                       int64_t *rows, ft_error *err)
{
    ft_h5file *f = &ds->file;
    if (H5Lexists(f->id, name, H5P_DEFAULT) <= 0) {
        ft_fail(err, "%s: dataset /%s is missing", f->path, name);
        return -1;
    }
    hid_t d = H5Dopen2(f->id, name, H5P_DEFAULT);
    hid_t s = H5Dget_space(d);
    hid_t t = H5Dget_type(d);
    hsize_t dims[2] = { 0, 0 };
    int rank = H5Sget_simple_extent_ndims(s);
    if (rank == 2)
        H5Sget_simple_extent_dims(s, dims, NULL);
    int ok = rank == 2 && dims[1] == (hsize_t)ds->info.seq_len + 1 && H5Tget_class(t) == cls &&
             H5Tget_size(t) == size;
    H5Tclose(t);
    H5Sclose(s);
    if (!ok) {
        ft_fail(err, "%s: /%s must be a [rows, %d] array of %zu-byte %s (seq_len %d + 1)",
                f->path, name, ds->info.seq_len + 1, size,
                cls == H5T_INTEGER ? "integers" : "values", ds->info.seq_len);
        H5Dclose(d);
        return -1;
    }
    *rows = (int64_t)dims[0];
    return d;
}

int ft_dataset_open(ft_dataset *ds, const char *path, MPI_Comm comm, ft_error *err)
{
    memset(ds, 0, sizeof *ds);
    ds->tokens = ds->loss_mask = ds->segment = -1;
    if (ft_h5_open(&ds->file, path, comm, err))
        return -1;
    int64_t r1, r2, r3;
    if (ft_h5_check_kind(&ds->file, "dataset", err) || read_info(ds, err) ||
        (ds->tokens = open_rows(ds, "tokens", H5T_INTEGER, 4, &r1, err)) < 0 ||
        (ds->loss_mask = open_rows(ds, "loss_mask", H5T_INTEGER, 1, &r2, err)) < 0 ||
        (ds->segment = open_rows(ds, "segment", H5T_INTEGER, 4, &r3, err)) < 0) {
        ft_dataset_close(ds);
        return -1;
    }
    if (r1 != r2 || r1 != r3 || r1 < 1) {
        ft_fail(err, "%s: tokens, loss_mask and segment must have the same number (>0) of rows "
                "(%lld, %lld, %lld)", path, (long long)r1, (long long)r2, (long long)r3);
        ft_dataset_close(ds);
        return -1;
    }
    ds->info.rows = r1;
    return 0;
}

void ft_dataset_close(ft_dataset *ds)
{
    if (ds->tokens >= 0)
        H5Dclose(ds->tokens);
    if (ds->loss_mask >= 0)
        H5Dclose(ds->loss_mask);
    if (ds->segment >= 0)
        H5Dclose(ds->segment);
    ds->tokens = ds->loss_mask = ds->segment = -1;
    ft_h5_close(&ds->file, NULL);
}

int ft_dataset_read_info(const char *path, MPI_Comm comm, const char *what, ft_dataset_info *info,
                         ft_error *err)
{
    ft_dataset ds;
    const int opened = ft_dataset_open(&ds, path, comm, err);
    if (ft_agree_config(comm, opened, err)) {
        if (opened == 0) /* another rank failed: this one still closes its handle */
            ft_dataset_close(&ds);
        return ft_fail_context(err, "%s", what);
    }
    *info = ds.info;
    ft_dataset_close(&ds);
    return 0;
}

typedef struct row_order {
    int64_t row;
    int slot;
} row_order;

static int by_row(const void *a, const void *b)
{
    const row_order *x = a, *y = b;
    return (x->row > y->row) - (x->row < y->row);
}

/* HDF5 transfers a union of hyperslabs in file order, so the distinct rows are read
 * sorted into a staging buffer and then copied to the caller's order. */
static int read_one(ft_dataset *ds, hid_t d, hid_t mem_type, size_t elem, const row_order *order,
                    int n, int n_distinct, const int64_t *distinct, void *out, ft_error *err)
{
    const hsize_t W = (hsize_t)ds->info.seq_len + 1;
    hid_t fspace = H5Dget_space(d);
    H5Sselect_none(fspace);
    for (int i = 0; i < n_distinct; i++) {
        hsize_t start[2] = { (hsize_t)distinct[i], 0 }, count[2] = { 1, W };
        H5Sselect_hyperslab(fspace, i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, start, NULL, count,
                            NULL);
    }
    hsize_t mdim = n_distinct > 0 ? (hsize_t)n_distinct * W : 1;
    hid_t mspace = H5Screate_simple(1, &mdim, NULL);
    if (n_distinct == 0)
        H5Sselect_none(mspace);
    unsigned char *stage = malloc((size_t)mdim * elem);
    int rc = 0;
    if (!stage) {
        rc = ft_fail(err, "out of host memory");
    } else if (H5Dread(d, mem_type, mspace, fspace, ds->file.dxpl, stage) < 0) {
        rc = ft_fail(err, "%s: cannot read rows (truncated or corrupt file?)", ds->file.path);
    } else {
        int k = -1;
        for (int i = 0; i < n; i++) {
            if (i == 0 || order[i].row != order[i - 1].row)
                k++;
            memcpy((unsigned char *)out + (size_t)order[i].slot * W * elem,
                   stage + (size_t)k * W * elem, W * elem);
        }
    }
    free(stage);
    H5Sclose(mspace);
    H5Sclose(fspace);
    return rc;
}

/* Every id below the file's vocab_size: an id beyond it means the file was written for
 * another tokenizer (or is damaged), and would index past the embedding rows the
 * start-up check sized for vocab_size. */
static int check_token_ids(const ft_dataset *ds, const int64_t *rows, int n,
                           const uint32_t *tokens, ft_error *err)
{
    const size_t W = (size_t)ds->info.seq_len + 1;
    const uint32_t V = (uint32_t)ds->info.vocab_size;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < W; j++)
            if (tokens[(size_t)i * W + j] >= V)
                return ft_fail(err, "%s: row %lld holds token id %u, not below the file's "
                               "vocab_size %d (written with another tokenizer, or damaged)",
                               ds->file.path, (long long)rows[i], tokens[(size_t)i * W + j],
                               ds->info.vocab_size);
    return 0;
}

int ft_dataset_read_rows(ft_dataset *ds, const int64_t *rows, int n, uint32_t *tokens,
                         uint8_t *loss_mask, int32_t *segment, ft_error *err)
{
    row_order *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    int64_t *distinct = malloc(sizeof *distinct * (size_t)(n > 0 ? n : 1));
    if (!order || !distinct) {
        free(order);
        free(distinct);
        return ft_fail(err, "out of host memory");
    }
    for (int i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= ds->info.rows) {
            free(order);
            free(distinct);
            return ft_fail(err, "%s: row %lld out of range (%lld rows)", ds->file.path,
                           (long long)rows[i], (long long)ds->info.rows);
        }
        order[i] = (row_order){ rows[i], i };
    }
    qsort(order, (size_t)n, sizeof *order, by_row);
    int n_distinct = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || order[i].row != order[i - 1].row)
            distinct[n_distinct++] = order[i].row;
    int rc = read_one(ds, ds->tokens, H5T_NATIVE_UINT32, 4, order, n, n_distinct, distinct, tokens,
                      err) ||
             read_one(ds, ds->loss_mask, H5T_NATIVE_UINT8, 1, order, n, n_distinct, distinct,
                      loss_mask, err) ||
             read_one(ds, ds->segment, H5T_NATIVE_INT32, 4, order, n, n_distinct, distinct,
                      segment, err);
    free(order);
    free(distinct);
    return rc || check_token_ids(ds, rows, n, tokens, err) ? -1 : 0;
}

static int write_rows(ft_h5file *f, const char *name, hid_t ftype, hid_t mtype, int64_t rows,
                      int width, const void *data, ft_error *err)
{
    hsize_t dims[2] = { (hsize_t)rows, (hsize_t)width };
    hid_t s = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f->id, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, f->dxpl, data);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(s);
    return rc < 0 ? ft_fail(err, "%s: cannot write /%s", f->path, name) : 0;
}

int ft_dataset_write_attrs(const ft_h5file *f, const ft_dataset_info *in, ft_error *err)
{
    int rc = ft_h5_write_kind(f, "dataset", err) ||
             ft_h5_attr_write_i64(f, f->id, "seq_len", in->seq_len, err) ||
             ft_h5_attr_write_i64(f, f->id, "vocab_size", in->vocab_size, err) ||
             ft_h5_attr_write_i64(f, f->id, "bos_token_id", in->bos_token_id, err) ||
             ft_h5_attr_write_i64(f, f->id, "eos_token_id", in->eos_token_id, err) ||
             ft_h5_attr_write_i64(f, f->id, "pad_token_id", in->pad_token_id, err) ||
             ft_h5_attr_write_i64(f, f->id, "n_documents", in->n_documents, err) ||
             ft_h5_attr_write_i64(f, f->id, "n_target_tokens", in->n_target_tokens, err) ||
             ft_h5_attr_write_str(f, f->id, "tokenizer_hash", in->tokenizer_hash, err) ||
             ft_h5_attr_write_str(f, f->id, "template", in->template_name, err) ||
             ft_tok_fingerprint_write(f, in->tokenizer_fingerprint, err);
    return rc ? -1 : 0;
}

uint64_t ft_dataset_reserve_bytes(const ft_dataset_info *info)
{
    /* tokens u32, loss_mask u8, segment i32 per element */
    const uint64_t elems = (uint64_t)info->rows * (uint64_t)(info->seq_len + 1);
    return elems * 9u + (3u << 20) + (64u << 10);
}

int ft_dataset_write(const char *path, const ft_dataset_info *in, const uint32_t *tokens,
                     const uint8_t *loss_mask, const int32_t *segment, ft_error *err)
{
    ft_h5file f;
    if (ft_h5_create(&f, path, MPI_COMM_SELF, err))
        return -1;
    const int W = in->seq_len + 1;
    /* space first: a full disk is one line here, not a failed write and close */
    int rc = ft_dataset_write_attrs(&f, in, err) ||
             ft_h5_reserve(&f, ft_dataset_reserve_bytes(in), err) ||
             write_rows(&f, "tokens", H5T_STD_U32LE, H5T_NATIVE_UINT32, in->rows, W, tokens, err) ||
             write_rows(&f, "loss_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, in->rows, W, loss_mask,
                        err) ||
             write_rows(&f, "segment", H5T_STD_I32LE, H5T_NATIVE_INT32, in->rows, W, segment, err);
    if (ft_h5_close(&f, rc ? NULL : err))
        rc = 1;
    return rc ? -1 : 0;
}
