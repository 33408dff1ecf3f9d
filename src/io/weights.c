#include "io/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ft_weights_read_config(const ft_h5file *f, ft_model_config *c, ft_error *err)
{
    memset(c, 0, sizeof *c);
    hid_t g = H5Gopen2(f->id, "/config", H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: group /config is missing (not a weights file?)", f->path);
    int rc = -1;
    int tied = 0;
    char rope_type[32];
    if (read_int(f, g, "vocab_size", &c->vocab_size, err) ||
        read_int(f, g, "hidden_size", &c->hidden_size, err) ||
        read_int(f, g, "intermediate_size", &c->intermediate_size, err) ||
        read_int(f, g, "num_hidden_layers", &c->num_hidden_layers, err) ||
        read_int(f, g, "num_attention_heads", &c->num_attention_heads, err) ||
        read_int(f, g, "num_key_value_heads", &c->num_key_value_heads, err) ||
        read_int(f, g, "head_dim", &c->head_dim, err) ||
        read_int(f, g, "max_position_embeddings", &c->max_position_embeddings, err) ||
        read_int(f, g, "tie_word_embeddings", &tied, err) ||
        ft_h5_attr_read_f64(f, g, "rms_norm_eps", &c->rms_norm_eps, err) ||
        ft_h5_attr_read_f64(f, g, "rope_theta", &c->rope_theta, err) ||
        ft_h5_attr_read_str(f, g, "rope_scaling_type", rope_type, sizeof rope_type, err))
        goto done;
    c->tie_word_embeddings = tied != 0;
    c->bos_token_id = c->eos_token_id = -1;
    if (ft_h5_attr_exists(g, "bos_token_id") && read_int(f, g, "bos_token_id", &c->bos_token_id, err))
        goto done;
    if (ft_h5_attr_exists(g, "eos_token_id") && read_int(f, g, "eos_token_id", &c->eos_token_id, err))
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
    const struct { const char *name; int64_t v; } ints[] = {
        { "vocab_size", c->vocab_size },
        { "hidden_size", c->hidden_size },
        { "intermediate_size", c->intermediate_size },
        { "num_hidden_layers", c->num_hidden_layers },
        { "num_attention_heads", c->num_attention_heads },
        { "num_key_value_heads", c->num_key_value_heads },
        { "head_dim", c->head_dim },
        { "max_position_embeddings", c->max_position_embeddings },
        { "tie_word_embeddings", c->tie_word_embeddings ? 1 : 0 },
        { "bos_token_id", c->bos_token_id },
        { "eos_token_id", c->eos_token_id },
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && !rc; i++)
        rc = ft_h5_attr_write_i64(f, g, ints[i].name, ints[i].v, err);
    if (!rc)
        rc = ft_h5_attr_write_f64(f, g, "rms_norm_eps", c->rms_norm_eps, err);
    if (!rc)
        rc = ft_h5_attr_write_f64(f, g, "rope_theta", c->rope_theta, err);
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

/* Transfers one tensor's part of the unit range [begin, end); buf holds the whole
 * range (fp32). Always issues the (collective) transfer, possibly empty. */
/* Per element: one 64-bit multiply of (bits, index) by an odd constant and a
 * xor-shift, summed: position-dependent, order-independent (a sum), and cheap enough
 * to run at memory speed with OpenMP. */
uint64_t ft_weights_hash_part(uint64_t first_index, const void *bits, size_t n, int bytes_per)
{
    uint64_t h = 0;
    const uint16_t *b16 = bits;
    const uint32_t *b32 = bits;
#pragma omp parallel for reduction(+ : h) schedule(static) if (n >= (1u << 16))
    for (size_t i = 0; i < n; i++) {
        uint64_t w = bytes_per == 2 ? b16[i] : b32[i];
        uint64_t t = ((w << 32) ^ (first_index + i) ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
        h += t ^ (t >> 31);
    }
    return h;
}

static int transfer_tensor(const ft_h5file *f, const char *group, const ft_tensor_info *ti,
                           size_t begin, size_t end, float *buf, int writing, uint64_t *hash,
                           ft_error *err)
{
    ft_file_dtype dtype;
    hid_t d = open_tensor(f, group, ti, &dtype, err);
    if (d < 0)
        return -1;
    size_t lo = begin > ti->offset ? begin : ti->offset;
    size_t hi = end < ti->offset + ti->numel ? end : ti->offset + ti->numel;
    if (hi < lo)
        hi = lo;
    const size_t n = hi - lo;
    hsize_t dims[2] = { (hsize_t)ti->shape[0], (hsize_t)ti->shape[1] };
    hid_t fspace = H5Dget_space(d);
    hsize_t mdim = n > 0 ? n : 1;
    hid_t mspace = H5Screate_simple(1, &mdim, NULL);
    if (n == 0)
        H5Sselect_none(mspace);
    int rc = ft_h5_select_flat_range(fspace, ti->ndim, dims, lo - ti->offset, hi - ti->offset);
    float *part = buf + (lo - begin);
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
                *hash += ft_weights_hash_part(lo - ti->offset, tmp, n, 2);
        } else {
            h = writing ? H5Dwrite(d, H5T_NATIVE_FLOAT, mspace, fspace, f->dxpl, part)
                        : H5Dread(d, H5T_NATIVE_FLOAT, mspace, fspace, f->dxpl, part);
            if (hash && h >= 0)
                *hash += ft_weights_hash_part(lo - ti->offset, part, n, 4);
        }
        if (h < 0)
            rc = ft_fail(err, "%s: cannot %s %s/%s (truncated or corrupt file?)", f->path,
                         writing ? "write" : "read", group, ti->name);
    }
    free(tmp);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(d);
    return rc;
}

static int transfer_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end, float *buf, int writing, uint64_t *hashes,
                          ft_error *err)
{
    for (int t = 0; t < u->n_tensors; t++)
        if (transfer_tensor(f, group, &u->tensors[t], begin, end, buf, writing,
                            hashes ? &hashes[t] : NULL, err))
            return -1;
    return 0;
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
