#include "io/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_fields.h"
#include "util/bf16.h"

/* ---------------------------------------------------------------- config */

static int read_int(const ft_h5file *f, hid_t g, const char *name, int *v, ft_error *err)
{
    int64_t x;
    if (ft_h5_attr_read_i64(f, g, name, &x, err))
        return ft_fail(err, "%s: /config attribute '%s' is missing or not an integer", f->path,
                       name);
    if (x < -1 || x > 0x7fffffff)
        return ft_fail(err, "%s: /config/%s = %lld is out of range", f->path, name, (long long)x);
    *v = (int)x;
    return 0;
}

/* One table row (model/model_fields.h) from /config into c. */
static int read_field(const ft_h5file *f, hid_t g, const ft_model_field *fd, ft_model_config *c,
                      ft_error *err)
{
    if (!ft_h5_attr_exists(g, fd->attr)) {
        if (fd->required)
            return ft_fail(err, "%s: /config attribute '%s' is missing", f->path, fd->attr);
        ft_model_field_set(c, fd, fd->absent);
        return 0;
    }
    if (fd->type == FT_FIELD_DOUBLE) {
        double v;
        if (ft_h5_attr_read_f64(f, g, fd->attr, &v, err))
            return -1;
        ft_model_field_set(c, fd, v);
        return 0;
    }
    if (fd->type == FT_FIELD_FAMILY) {
        char name[32];
        if (ft_h5_attr_read_str(f, g, fd->attr, name, sizeof name, err))
            return -1;
        const ft_family_info *fam = ft_family_by_name(name);
        if (!fam)
            return ft_fail(err, "%s: /config %s '%s' is not one ftmpi has (%s)", f->path,
                           fd->attr, name, ft_family_names());
        ft_model_field_set(c, fd, fam->family);
        return 0;
    }
    int v;
    if (read_int(f, g, fd->attr, &v, err))
        return -1;
    ft_model_field_set(c, fd, v);
    return 0;
}

int ft_weights_read_config(const ft_h5file *f, ft_model_config *c, ft_error *err)
{
    memset(c, 0, sizeof *c);
    hid_t g = H5Gopen2(f->id, "/config", H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: group /config is missing (not a weights file?)", f->path);
    int rc = -1;
    char rope_type[32];
    size_t nf;
    const ft_model_field *fields = ft_model_fields(&nf);
    for (size_t i = 0; i < nf; i++)
        if (read_field(f, g, &fields[i], c, err))
            goto done;
    if (ft_h5_attr_read_str(f, g, "rope_scaling_type", rope_type, sizeof rope_type, err))
        goto done;
    if (strcmp(rope_type, "llama3") == 0) {
        ft_rope_scaling *s = &c->rope_scaling;
        s->type = FT_ROPE_SCALING_LLAMA3;
        if (ft_h5_attr_read_f64(f, g, "rope_scaling_factor", &s->factor, err) ||
            ft_h5_attr_read_f64(f, g, "rope_scaling_low_freq_factor", &s->low_freq_factor, err) ||
            ft_h5_attr_read_f64(f, g, "rope_scaling_high_freq_factor", &s->high_freq_factor, err) ||
            read_int(f, g, "rope_scaling_original_max_position_embeddings",
                     &s->original_max_position_embeddings, err))
            goto done;
    } else if (strcmp(rope_type, "none") != 0) {
        ft_fail(err, "%s: /config rope_scaling_type '%s' is not supported (none, llama3)", f->path,
                rope_type);
        goto done;
    }
    if (ft_model_config_validate(c, err)) {
        ft_fail_context(err, "%s: /config", f->path);
        goto done;
    }
    rc = 0;
done:
    H5Gclose(g);
    return rc;
}

int ft_weights_write_config(const ft_h5file *f, const ft_model_config *c, ft_error *err)
{
    hid_t g = H5Gcreate2(f->id, "/config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: cannot create /config", f->path);
    int rc = 0;
    size_t nf;
    const ft_model_field *fields = ft_model_fields(&nf);
    for (size_t i = 0; i < nf && !rc; i++) {
        const ft_model_field *fd = &fields[i];
        double v = ft_model_field_get(c, fd);
        if (fd->omit_when_absent && v == fd->absent)
            continue; /* files of the Llama shape keep their pre-family attributes */
        if (fd->type == FT_FIELD_DOUBLE)
            rc = ft_h5_attr_write_f64(f, g, fd->attr, v, err);
        else if (fd->type == FT_FIELD_FAMILY)
            rc = ft_h5_attr_write_str(f, g, fd->attr, ft_model_family_of(c)->name, err);
        else
            rc = ft_h5_attr_write_i64(f, g, fd->attr, (int64_t)v, err);
    }
    const ft_rope_scaling *s = &c->rope_scaling;
    int llama3 = s->type == FT_ROPE_SCALING_LLAMA3;
    if (!rc)
        rc = ft_h5_attr_write_str(f, g, "rope_scaling_type", llama3 ? "llama3" : "none", err);
    if (!rc && llama3)
        rc = ft_h5_attr_write_f64(f, g, "rope_scaling_factor", s->factor, err) ||
             ft_h5_attr_write_f64(f, g, "rope_scaling_low_freq_factor", s->low_freq_factor, err) ||
             ft_h5_attr_write_f64(f, g, "rope_scaling_high_freq_factor", s->high_freq_factor, err) ||
             ft_h5_attr_write_i64(f, g, "rope_scaling_original_max_position_embeddings",
                                  s->original_max_position_embeddings, err);
    H5Gclose(g);
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- tensors */

static void dataset_path(char *buf, size_t len, const char *group, const char *name)
{
    snprintf(buf, len, "%s/%s", group, name);
}

int ft_weights_create_tensors(const ft_h5file *f, const char *group, const ft_model_layout *l,
                              ft_file_dtype dtype, ft_error *err)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    /* No fill: every byte is written once, by the rank that owns it. */
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ftype = dtype == FT_FILE_BF16 ? H5T_STD_U16LE : H5T_IEEE_F32LE;
    int rc = 0;
    for (int u = 0; u < l->n_units && !rc; u++)
        for (int t = 0; t < l->units[u].n_tensors && !rc; t++) {
            const ft_tensor_info *ti = &l->units[u].tensors[t];
            char path[256];
            dataset_path(path, sizeof path, group, ti->name);
            hsize_t dims[2] = { (hsize_t)ti->shape[0], (hsize_t)ti->shape[1] };
            hid_t space = H5Screate_simple(ti->ndim, dims, NULL);
            hid_t d = H5Dcreate2(f->id, path, ftype, space, lcpl, dcpl, H5P_DEFAULT);
            H5Sclose(space);
            if (d < 0) {
                rc = ft_fail(err, "%s: cannot create dataset %s", f->path, path);
                break;
            }
            if (dtype == FT_FILE_BF16) {
                ft_h5file fa = *f;
                rc = ft_h5_attr_write_str(&fa, d, "dtype", "bfloat16", err);
            }
            H5Dclose(d);
        }
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    return rc;
}

/* Opens a tensor's dataset and checks shape; reports its dtype. */
static hid_t open_tensor(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                         ft_file_dtype *dtype, ft_error *err)
{
    char path[256];
    dataset_path(path, sizeof path, group, ti->name);
    if (H5Lexists(f->id, group, H5P_DEFAULT) <= 0 || H5Lexists(f->id, path, H5P_DEFAULT) <= 0) {
        ft_fail(err, "%s: tensor %s is missing", f->path, path);
        return -1;
    }
    hid_t d = H5Dopen2(f->id, path, H5P_DEFAULT);
    if (d < 0) {
        ft_fail(err, "%s: %s is not a dataset", f->path, path);
        return -1;
    }
    hid_t space = H5Dget_space(d);
    int rank = H5Sget_simple_extent_ndims(space);
    hsize_t dims[2] = { 0, 1 };
    if (rank == 1 || rank == 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    H5Sclose(space);
    if (rank != ti->ndim || dims[0] != (hsize_t)ti->shape[0] ||
        (rank == 2 && dims[1] != (hsize_t)ti->shape[1])) {
        ft_fail(err, "%s: %s has shape [%llu%s%llu], this model needs [%lld%s%lld]", f->path, path,
                (unsigned long long)dims[0], rank == 2 ? "," : "",
                rank == 2 ? (unsigned long long)dims[1] : 0ull, ti->shape[0],
                ti->ndim == 2 ? "," : "", ti->ndim == 2 ? ti->shape[1] : 0ll);
        if (rank == 1)
            ft_fail(err, "%s: %s has shape [%llu], this model needs %s", f->path, path,
                    (unsigned long long)dims[0], ti->ndim == 2 ? "a 2-D tensor" : "another size");
        H5Dclose(d);
        return -1;
    }
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    H5Tclose(t);
    if (cls == H5T_FLOAT && size == 4) {
        *dtype = FT_FILE_F32;
    } else if (cls == H5T_INTEGER && size == 2) {
        char tag[32] = "";
        ft_h5file fa = *f;
        if (!ft_h5_attr_exists(d, "dtype") ||
            ft_h5_attr_read_str(&fa, d, "dtype", tag, sizeof tag, err) ||
            strcmp(tag, "bfloat16") != 0) {
            ft_fail(err, "%s: %s is 16-bit integer data without dtype=\"bfloat16\"", f->path, path);
            H5Dclose(d);
            return -1;
        }
        *dtype = FT_FILE_BF16;
    } else {
        ft_fail(err, "%s: %s has an unsupported datatype (fp32 or bfloat16 expected)", f->path,
                path);
        H5Dclose(d);
        return -1;
    }
    return d;
}

int ft_weights_check_tensors(const ft_h5file *f, const char *group, const ft_model_layout *l,
                             ft_error *err)
{
    for (int u = 0; u < l->n_units; u++)
        for (int t = 0; t < l->units[u].n_tensors; t++) {
            ft_file_dtype dt;
            hid_t d = open_tensor(f, group, &l->units[u].tensors[t], &dt, err);
            if (d < 0)
                return -1;
            H5Dclose(d);
        }
    return 0;
}

/* One element's term of the hash (see weights.h): one 64-bit multiply of (bits,
 * index) by an odd constant and a xor-shift. Summed, the terms are position-dependent
 * and order-independent. */
static inline uint64_t hash_term(uint64_t bits, uint64_t index)
{
    uint64_t t = ((bits << 32) ^ index ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    return t ^ (t >> 31);
}

/* The hash terms of n consecutive elements. The simd pragma vectorizes the 64-bit
 * multiply (2x the scalar loop with AVX2/AVX-512), which gcc's -O2 cost model skips. */
#define HASH_SPAN(name, type)                                                              \
    static uint64_t name(uint64_t first_index, const type *b, size_t n)                   \
    {                                                                                      \
        uint64_t h = 0;                                                                    \
        _Pragma("omp simd reduction(+ : h)")                                               \
        for (size_t i = 0; i < n; i++)                                                     \
            h += hash_term(b[i], first_index + i);                                         \
        return h;                                                                          \
    }
HASH_SPAN(hash_span_u16, uint16_t)
HASH_SPAN(hash_span_u32, uint32_t)

static uint64_t hash_span(uint64_t first_index, const void *bits, size_t n, int bytes_per)
{
    return bytes_per == 2 ? hash_span_u16(first_index, bits, n)
                          : hash_span_u32(first_index, bits, n);
}

uint64_t ft_weights_hash_part(uint64_t first_index, const void *bits, size_t n, int bytes_per)
{
    enum { BLOCK = 1 << 16 };
    if (n < 4 * (size_t)BLOCK)
        return hash_span(first_index, bits, n, bytes_per);
    /* large parts: blocks over the OpenMP threads (a sum: any order gives the same) */
    const long blocks = (long)((n + BLOCK - 1) / BLOCK);
    uint64_t h = 0;
#pragma omp parallel for reduction(+ : h) schedule(static)
    for (long k = 0; k < blocks; k++) {
        const size_t at = (size_t)k * BLOCK, m = n - at < BLOCK ? n - at : BLOCK;
        h += hash_span(first_index + at, (const char *)bits + at * (size_t)bytes_per, m,
                       bytes_per);
    }
    return h;
}

/* Bytes per stored element. */
static int file_dtype_bytes(ft_file_dtype dtype) { return dtype == FT_FILE_BF16 ? 2 : 4; }

/* The part of tensor ti inside the unit range [begin, end): its unit offsets
 * [*lo, *lo + count); count 0 when they do not meet. */
static size_t tensor_part(const ft_tensor_info *ti, size_t begin, size_t end, size_t *lo)
{
    size_t hi;
    return ft_tensor_overlap(ti, begin, end, lo, &hi) ? hi - *lo : 0;
}

/* The file address of d's bytes when they can be moved raw: a contiguous, allocated
 * dataset stored little-endian, on a little-endian host. Depends only on the file, so
 * every rank makes the same choice (the HDF5 path is collective). */
static bool raw_address(hid_t d, ft_file_dtype dtype, uint64_t *addr)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    hid_t dcpl = H5Dget_create_plist(d);
    const bool contiguous = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    hid_t t = H5Dget_type(d);
    const bool le = t >= 0 && H5Tequal(t, dtype == FT_FILE_BF16 ? H5T_STD_U16LE
                                                              : H5T_IEEE_F32LE) > 0;
    if (t >= 0)
        H5Tclose(t);
    const haddr_t a = contiguous && le ? H5Dget_offset(d) : HADDR_UNDEF;
    *addr = (uint64_t)a;
    return a != HADDR_UNDEF;
#else
    (void)d, (void)dtype, (void)addr;
    return false;
#endif
}

/* "<file>: <what>" from extent_io becomes "<file>: <group>/<tensor>: <what>". */
static int name_tensor(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                       ft_error *err)
{
    if (!err)
        return -1;
    char what[FT_ERROR_MAX];
    const size_t pl = strlen(f->path);
    const char *m = err->msg;
    if (strncmp(m, f->path, pl) == 0 && strncmp(m + pl, ": ", 2) == 0)
        m += pl + 2;
    snprintf(what, sizeof what, "%s", m);
    return ft_fail(err, "%s: %s/%s: %s", f->path, group, ti->name, what);
}

/* Elements per piece of a raw transfer: converted and hashed while in cache, on
 * their way to or from the staging buffers (extent_io coalesces written pieces and
 * reads the announced ranges ahead). */
enum { RAW_PIECE = 1 << 16 };

/* Elements [first, first+n) of a tensor stored at file address addr, to or from the
 * fp32 values part, moved raw (io/extent_io.h). */
static int transfer_tensor_raw(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                               uint64_t addr, ft_file_dtype dtype, size_t first, float *part,
                               size_t n, int writing, uint64_t *hash, ft_error *err)
{
    const int bytes_per = file_dtype_bytes(dtype);
    const uint64_t at = addr + (uint64_t)first * (uint64_t)bytes_per;
    uint16_t *bits = NULL;
    if (dtype == FT_FILE_BF16 && !(bits = malloc(RAW_PIECE * sizeof *bits)))
        return ft_fail(err, "out of host memory");
    int rc = 0;
    if (writing) {
        for (size_t i = 0; i < n && !rc; i += RAW_PIECE) {
            const size_t m = n - i < RAW_PIECE ? n - i : RAW_PIECE;
            const void *src = part + i;
            if (bits) {
                for (size_t k = 0; k < m; k++)
                    bits[k] = ft_f32_to_bf16(part[i + k]);
                src = bits;
            }
            if (hash)
                *hash += ft_weights_hash_part(first + i, src, m, bytes_per);
            rc = ft_extent_write(f->raw, at + (uint64_t)i * (uint64_t)bytes_per, src,
                                 m * (size_t)bytes_per, err);
        }
    } else { /* pieces out of the read-ahead, hashed while in cache */
        for (size_t i = 0; i < n && !rc; i += RAW_PIECE) {
            const size_t m = n - i < RAW_PIECE ? n - i : RAW_PIECE;
            void *dst = bits ? (void *)bits : (void *)(part + i);
            rc = ft_extent_read(f->raw, at + (uint64_t)i * (uint64_t)bytes_per, dst,
                                m * (size_t)bytes_per, err);
            if (!rc && hash)
                *hash += ft_weights_hash_part(first + i, dst, m, bytes_per);
            if (!rc && bits)
                for (size_t k = 0; k < m; k++)
                    part[i + k] = ft_bf16_to_f32(bits[k]);
        }
    }
    free(bits);
    return rc ? name_tensor(f, group, ti, err) : 0;
}

/* The same through HDF5: a collective transfer, issued even when empty. */
static int transfer_tensor_hdf5(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                                hid_t d, ft_file_dtype dtype, size_t first, float *part,
                                size_t n, int writing, uint64_t *hash, ft_error *err)
{
    hsize_t dims[2] = { (hsize_t)ti->shape[0], (hsize_t)ti->shape[1] };
    hid_t fspace = H5Dget_space(d);
    hsize_t mdim = n > 0 ? n : 1;
    hid_t mspace = H5Screate_simple(1, &mdim, NULL);
    if (n == 0)
        H5Sselect_none(mspace);
    int rc = ft_h5_select_flat_range(fspace, ti->ndim, dims, first, first + n);
    uint16_t *tmp = NULL;
    if (!rc && dtype == FT_FILE_BF16 && n > 0 && !(tmp = malloc(n * sizeof *tmp)))
        rc = ft_fail(err, "out of host memory");
    if (!rc) {
        herr_t h;
        if (dtype == FT_FILE_BF16) {
            if (writing)
                for (size_t i = 0; i < n; i++)
                    tmp[i] = ft_f32_to_bf16(part[i]);
            h = writing ? H5Dwrite(d, H5T_NATIVE_UINT16, mspace, fspace, f->dxpl, tmp)
                        : H5Dread(d, H5T_NATIVE_UINT16, mspace, fspace, f->dxpl, tmp);
            if (!writing && h >= 0)
                for (size_t i = 0; i < n; i++)
                    part[i] = ft_bf16_to_f32(tmp[i]);
            if (hash && h >= 0)
                *hash += ft_weights_hash_part(first, tmp, n, 2);
        } else {
            h = writing ? H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, fspace, f->dxpl, part)
                        : H5Dread(d, H5T_NATIVE_FLOAT, mspace, fspace, f->dxpl, part);
            if (hash && h >= 0)
                *hash += ft_weights_hash_part(first, part, n, 4);
        }
        if (h < 0)
            rc = ft_fail(err, "%s: cannot %s %s/%s (truncated or corrupt file?)", f->path,
                         writing ? "write" : "read", group, ti->name);
    }
    free(tmp);
    H5Sclose(mspace);
    H5Sclose(fspace);
    return rc;
}

/* Transfers one tensor's part of the unit range [begin, end); buf holds the whole
 * range (fp32). */
static int transfer_tensor(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                           size_t begin, size_t end, float *buf, int writing, uint64_t *hash,
                           ft_error *err)
{
    ft_file_dtype dtype;
    hid_t d = open_tensor(f, group, ti, &dtype, err);
    if (d < 0)
        return -1;
    size_t lo;
    const size_t n = tensor_part(ti, begin, end, &lo);
    uint64_t addr = 0;
    float *part = buf + (lo - begin);
    int rc = f->raw && raw_address(d, dtype, &addr)
                 ? transfer_tensor_raw(f, group, ti, addr, dtype, lo - ti->offset, part, n,
                                       writing, hash, err)
                 : transfer_tensor_hdf5(f, group, ti, d, dtype, lo - ti->offset, part, n,
                                        writing, hash, err);
    H5Dclose(d);
    return rc;
}

void ft_weights_will_read(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end)
{
    if (!f->raw)
        return;
    for (int t = 0; t < u->n_tensors; t++) {
        const ft_tensor_info *ti = &u->tensors[t];
        size_t lo;
        const size_t n = tensor_part(ti, begin, end, &lo);
        ft_file_dtype dtype;
        uint64_t addr;
        if (n == 0)
            continue;
        hid_t d = open_tensor(f, group, ti, &dtype, NULL);
        if (d < 0)
            return; /* the transfer will report it */
        const int bytes_per = file_dtype_bytes(dtype);
        if (raw_address(d, dtype, &addr))
            ft_extent_will_read(f->raw, addr + (uint64_t)(lo - ti->offset) * (uint64_t)bytes_per,
                                n * (size_t)bytes_per);
        H5Dclose(d);
    }
}

static int transfer_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end, float *buf, int writing, uint64_t *hashes,
                          ft_error *err)
{
    /* A write goes on past a failed tensor (a full disk fails on some ranks only, at
     * different tensors): every rank then makes the same sequence of collective HDF5
     * calls, and the caller's ft_agree decides. The first error is the one reported. */
    int rc = 0;
    for (int t = 0; t < u->n_tensors && (writing || !rc); t++) {
        ft_error later;
        if (transfer_tensor(f, group, &u->tensors[t], begin, end, buf, writing,
                            hashes ? &hashes[t] : NULL, rc ? &later : err))
            rc = -1;
    }
    return rc;
}

int ft_weights_read_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end, float *dst, ft_error *err)
{
    return transfer_range(f, group, u, begin, end, dst, 0, NULL, err);
}

int ft_weights_write_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                           size_t begin, size_t end, const float *src, ft_error *err)
{
    return transfer_range(f, group, u, begin, end, (float *)src, 1, NULL, err);
}

int ft_weights_read_range_hashed(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                                 size_t begin, size_t end, float *dst, uint64_t *hashes,
                                 ft_error *err)
{
    return transfer_range(f, group, u, begin, end, dst, 0, hashes, err);
}

int ft_weights_write_range_hashed(const ft_h5file *f, const char *group,
                                  const ft_unit_layout *u, size_t begin, size_t end,
                                  const float *src, uint64_t *hashes, ft_error *err)
{
    return transfer_range(f, group, u, begin, end, (float *)src, 1, hashes, err);
}
