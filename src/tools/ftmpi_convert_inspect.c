/* ftmpi-convert inspect: what an ftmpi HDF5 file or a safetensors file holds.
 *
 * HDF5 files: kind and version, the /config and /meta attributes (whatever exists),
 * and every dataset with dtype and shape. --verify recomputes each dataset's
 * content_hash attribute (checkpoints carry one per tensor, imports too) by
 * streaming the stored bits through a fixed buffer.
 * safetensors: header size, metadata and tensors (validated as on import).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/weights.h"
#include "tools/ftmpi_convert.h"

typedef struct inspect_opts {
    cv_common common;
    bool verify;
    const char *path;
} inspect_opts;

/* ------------------------------------------------------------------ HDF5 */

/* Prints a string with control characters escaped, cut at max bytes. */
static void print_escaped(const char *s, size_t max)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '\t')
            fputs("\\t", stdout);
        else if (ch < 0x20)
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
    if (n > max)
        printf("... (%zu bytes)", n);
}

typedef struct attr_ctx {
    const ft_h5file *f;
    const char *indent;
} attr_ctx;

static herr_t print_attr(hid_t loc, const char *name, const H5A_info_t *ainfo, void *data)
{
    (void)ainfo;
    const attr_ctx *ctx = data;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    hid_t s = a < 0 ? -1 : H5Aget_space(a);
    printf("%s%-46s ", ctx->indent, name);
    hssize_t npts = s < 0 ? -1 : H5Sget_simple_extent_npoints(s);
    H5T_class_t cls = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
    ft_error err;
    if (npts != 1) {
        printf("<%lld values>\n", (long long)npts);
    } else if (cls == H5T_INTEGER) {
        int64_t v;
        if (ft_h5_attr_read_i64(ctx->f, loc, name, &v, &err) == 0)
            printf("%lld\n", (long long)v);
        else
            printf("<unreadable>\n");
    } else if (cls == H5T_FLOAT) {
        double v;
        if (ft_h5_attr_read_f64(ctx->f, loc, name, &v, &err) == 0) {
            char buf[40]; /* shortest text that reads back as v: 1e-05, not 1.0000000000000001e-05 */
            for (int p = 1; p <= 17; p++) {
                snprintf(buf, sizeof buf, "%.*g", p, v);
                if (strtod(buf, NULL) == v)
                    break;
            }
            printf("%s\n", buf);
        }
        else
            printf("<unreadable>\n");
    } else if (cls == H5T_STRING) {
        char *buf = malloc(1 << 16);
        if (buf && ft_h5_attr_read_str(ctx->f, loc, name, buf, 1 << 16, &err) == 0) {
            putchar('"');
            print_escaped(buf, 72);
            printf("\"\n");
        } else {
            printf("<unreadable>\n");
        }
        free(buf);
    } else {
        printf("<type class %d>\n", (int)cls);
    }
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return 0;
}

static void print_group_attrs(const ft_h5file *f, const char *group)
{
    if (H5Lexists(f->id, group, H5P_DEFAULT) <= 0)
        return;
    hid_t g = H5Gopen2(f->id, group, H5P_DEFAULT);
    if (g < 0)
        return;
    printf("%s:\n", group);
    attr_ctx ctx = { f, "  " };
    hsize_t idx = 0;
    H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &idx, print_attr, &ctx);
    H5Gclose(g);
}

typedef struct visit_ctx {
    const ft_h5file *f;
    const inspect_opts *o;
    void *buf;
    size_t buf_bytes;
    int n_datasets, n_hashed, n_bad;
    uint64_t n_elems, n_bytes;
    ft_error err;
    int failed;
} visit_ctx;

/* Recomputes a dataset's content hash from its stored bits. */
static int verify_dataset(visit_ctx *v, hid_t d, const char *name, int dt, int ndim,
                          const hsize_t *dims, uint64_t numel, uint64_t *hash)
{
    const size_t esz = ft_st_dtype_size((ft_st_dtype)dt);
    const size_t chunk = cv_chunk_elems(v->buf_bytes, esz, ndim == 2 ? dims[1] : 0);
    hid_t mtype = dt == FT_ST_BF16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
    *hash = 0;
    for (uint64_t lo = 0; lo < numel; lo += chunk) {
        uint64_t hi = lo + chunk < numel ? lo + chunk : numel;
        if (cv_h5_transfer(v->f, d, name, ndim, dims, lo, hi, mtype, v->buf, false, &v->err))
            return -1;
        *hash += ft_weights_hash_part(lo, v->buf, (size_t)(hi - lo), (int)esz);
    }
    return 0;
}

static herr_t visit_dataset(hid_t root, const char *name, const H5O_info_t *info, void *data)
{
    visit_ctx *v = data;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t d = H5Dopen2(root, name, H5P_DEFAULT);
    if (d < 0)
        return 0;
    hid_t s = H5Dget_space(d);
    int ndim = H5Sget_simple_extent_ndims(s);
    hsize_t dims[8] = { 0 };
    if (ndim > 0 && ndim <= 8)
        H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= dims[i];
    int dt = cv_h5_dataset_dtype(v->f, d);
    hid_t t = H5Dget_type(d);
    size_t tsize = H5Tget_size(t);
    H5Tclose(t);
    char shape[128] = "[";
    for (int i = 0; i < ndim && i < 8; i++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", i ? "," : "",
                 (unsigned long long)dims[i]);
    strcat(shape, "]");
    printf("  /%-60s %-5s %-16s", name, dt == FT_ST_BF16 ? "bf16" : dt == FT_ST_F32 ? "fp32" : "other",
           shape);
    v->n_datasets++;
    v->n_elems += numel;
    v->n_bytes += numel * tsize;
    bool hashed = ft_h5_attr_exists(d, "content_hash");
    if (hashed && v->o->verify && dt >= 0 && ndim >= 1 && ndim <= 2) {
        int64_t want;
        uint64_t got;
        v->n_hashed++;
        if (ft_h5_attr_read_i64(v->f, d, "content_hash", &want, &v->err) ||
            verify_dataset(v, d, name, dt, ndim, dims, numel, &got)) {
            printf(" ERROR\n");
            v->failed = 1;
            H5Dclose(d);
            return -1; /* stops the visit; the error is in v->err */
        }
        bool ok = (uint64_t)want == got;
        v->n_bad += !ok;
        printf(" hash %s\n", ok ? "ok" : "MISMATCH");
    } else {
        printf("%s\n", hashed ? " hash" : "");
    }
    H5Dclose(d);
    return 0;
}

static int inspect_h5(const inspect_opts *o, ft_error *err)
{
    ft_h5file f;
    if (ft_h5_open(&f, o->path, MPI_COMM_SELF, err))
        return -1;
    char kind[64] = "(none: not written by ftmpi)";
    int64_t version = 0;
    ft_error ignore;
    if (ft_h5_attr_exists(f.id, "ftmpi_format"))
        ft_h5_attr_read_str(&f, f.id, "ftmpi_format", kind, sizeof kind, &ignore);
    if (ft_h5_attr_exists(f.id, "format_version"))
        ft_h5_attr_read_i64(&f, f.id, "format_version", &version, &ignore);
    printf("file: %s\nformat: HDF5, ftmpi_format %s, format_version %lld\n", o->path, kind,
           (long long)version);
    print_group_attrs(&f, "/config");
    print_group_attrs(&f, "/meta");
    print_group_attrs(&f, "/lora");
    printf("datasets:\n");
    visit_ctx v = { .f = &f, .o = o, .buf_bytes = o->common.buffer_bytes };
    if (o->verify && !(v.buf = malloc(v.buf_bytes))) {
        ft_h5_close(&f, &ignore);
        return ft_fail(err, "out of host memory for the buffer (try --buffer-size)");
    }
    H5Ovisit(f.id, H5_INDEX_NAME, H5_ITER_INC, visit_dataset, &v);
    free(v.buf);
    ft_h5_close(&f, &ignore);
    if (v.failed) {
        *err = v.err;
        return -1;
    }
    printf("total: %d datasets, %llu elements, %.1f MB\n", v.n_datasets,
           (unsigned long long)v.n_elems, (double)v.n_bytes / 1e6);
    if (o->verify) {
        if (v.n_hashed == 0)
            printf("verify: no content hashes in this file; nothing to verify\n");
        else if (v.n_bad)
            return ft_fail(err, "%s: %d of %d datasets do not match their content hash (corrupt "
                           "file)", o->path, v.n_bad, v.n_hashed);
        else
            printf("verify: %d content hashes ok\n", v.n_hashed);
    }
    return 0;
}

/* ------------------------------------------------------------ safetensors */

static int inspect_st(const inspect_opts *o, ft_error *err)
{
    ft_st_file f;
    if (ft_st_open(&f, o->path, FT_ST_ANY_DTYPE, err))
        return -1;
    printf("file: %s\nformat: safetensors, header %llu bytes, data %llu bytes\n", o->path,
           (unsigned long long)f.header_len,
           (unsigned long long)(f.file_size - f.data_start));
    printf("metadata:%s\n", f.n_meta ? "" : " (none)");
    for (int i = 0; i < f.n_meta; i++) {
        printf("  %-46s \"", f.meta_keys[i]);
        print_escaped(f.meta_values[i], 72);
        printf("\"\n");
    }
    printf("tensors:\n");
    uint64_t elems = 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const ft_st_tensor *t = &f.tensors[i];
        char shape[160] = "[";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", d ? "," : "",
                     (unsigned long long)t->shape[d]);
        strcat(shape, "]");
        printf("  %-60s %-5s %-16s [%llu, %llu)\n", t->name, ft_st_dtype_name(t->dtype), shape,
               (unsigned long long)t->begin, (unsigned long long)t->end);
        elems += ft_st_tensor_numel(t);
    }
    printf("total: %d tensors, %llu elements\n", f.n_tensors, (unsigned long long)elems);
    if (o->verify)
        printf("verify: safetensors carries no content hashes; header, offsets and file size "
               "are valid\n");
    ft_st_close(&f);
    return 0;
}

int cv_inspect_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "verify", no_argument, 0, 'v' }, { "buffer-size", required_argument, 0, 'b' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    inspect_opts o = { .common = { .buffer_bytes = CV_DEFAULT_BUFFER } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        uint64_t sz;
        switch (c) {
        case 'v': o.verify = true; break;
        case 'b':
            if (cv_parse_size(optarg, &sz) || sz < 4096 || sz > ((uint64_t)1 << 40))
                return cv_usage_error("inspect", "--buffer-size '%s': give a size >= 4KiB", optarg);
            o.common.buffer_bytes = (size_t)sz;
            break;
        case 'h': fputs(cv_usage_inspect, stdout); return CV_EXIT_OK;
        default: return cv_usage_error("inspect", "unknown option");
        }
    }
    if (argc - optind != 1)
        return cv_usage_error("inspect", "expected one FILE");
    o.path = argv[optind];
    ft_error err = { { 0 }, 0 };
    if (!cv_exists(o.path) || cv_is_dir(o.path)) {
        ft_fail(&err, "%s: %s", o.path, cv_exists(o.path) ? "is a directory (give a .h5 or "
                ".safetensors file)" : "no such file");
        return cv_report(&err);
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = H5Fis_hdf5(o.path) > 0 ? inspect_h5(&o, &err) : inspect_st(&o, &err);
    fflush(stdout);
    return rc ? cv_report(&err) : CV_EXIT_OK;
}
