/* ftmpi-convert helpers: sizes, timing, dtype conversion, raw HDF5 transfers, files. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/ftmpi_convert.h"
#include "util/input_file.h"
#include "util/output_file.h"
#include "util/bf16.h"

int cv_usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ftmpi-convert%s%s: ", sub ? " " : "", sub ? sub : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'ftmpi-convert %s%s--help'.\n", sub ? sub : "", sub ? " " : "");
    return CV_EXIT_USAGE;
}

int cv_report(const ft_error *err)
{
    fprintf(stderr, "ftmpi-convert: error: %s\n", err->msg);
    return CV_EXIT_FAIL;
}

int cv_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0))
        return -1;
    static const struct { const char *suffix; double mult; } units[] = {
        { "", 1 }, { "B", 1 }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "TB", 1e12 },
        { "KIB", 1024.0 }, { "MIB", 1048576.0 }, { "GIB", 1073741824.0 },
        { "TIB", 1099511627776.0 },
    };
    char up[8] = "";
    size_t n = strlen(end);
    if (n >= sizeof up)
        return -1;
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)(end[i] >= 'a' && end[i] <= 'z' ? end[i] - 32 : end[i]);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(up, units[i].suffix) == 0) {
            double b = v * units[i].mult;
            if (b < 1 || b > 1.8e19)
                return -1;
            *out = (uint64_t)b;
            return 0;
        }
    return -1;
}

double cv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cv_print_stats(const char *what, uint64_t bytes, double t0)
{
    double dt = cv_now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "stats: %s %.1f MB in %.2f s = %.1f MB/s, peak RSS %.1f MiB\n", what,
            (double)bytes / 1e6, dt, dt > 0 ? (double)bytes / 1e6 / dt : 0.0,
            (double)ru.ru_maxrss / 1024.0);
}

/* IEEE half -> single, exact (every f16 value is representable in f32). */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf / NaN (payload kept) */
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign; /* signed zero */
    } else {      /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void cv_convert(ft_st_dtype from, ft_st_dtype to, const void *src, void *dst, size_t n)
{
    if (from == to) {
        if (src != dst)
            memcpy(dst, src, n * ft_st_dtype_size(from));
        return;
    }
    const uint16_t *s16 = src;
    const float *s32 = src;
    if (to == FT_ST_F32) {
        float *d = dst;
        if (from == FT_ST_BF16)
            for (size_t i = 0; i < n; i++)
                d[i] = ft_bf16_to_f32(s16[i]);
        else
            for (size_t i = 0; i < n; i++)
                d[i] = f16_to_f32(s16[i]);
    } else { /* to BF16 */
        uint16_t *d = dst;
        if (from == FT_ST_F32)
            for (size_t i = 0; i < n; i++)
                d[i] = ft_f32_to_bf16(s32[i]);
        else
            for (size_t i = 0; i < n; i++)
                d[i] = ft_f32_to_bf16(f16_to_f32(s16[i]));
    }
}

int cv_h5_dataset_dtype(const ft_h5file *f, hid_t d)
{
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    H5Tclose(t);
    if (cls == H5T_FLOAT && size == 4)
        return FT_ST_F32;
    if (cls == H5T_INTEGER && size == 2 && ft_h5_attr_exists(d, "dtype")) {
        char tag[32] = "";
        ft_error e;
        if (ft_h5_attr_read_str(f, d, "dtype", tag, sizeof tag, &e) == 0 &&
            strcmp(tag, "bfloat16") == 0)
            return FT_ST_BF16;
    }
    return -1;
}

int cv_h5_transfer(const ft_h5file *f, hid_t d, const char *name, int ndim, const hsize_t *dims,
                   uint64_t lo, uint64_t hi, hid_t mtype, void *buf, bool writing, ft_error *err)
{
    hid_t fspace = H5Dget_space(d);
    hsize_t n = hi - lo;
    hid_t mspace = H5Screate_simple(1, &n, NULL);
    int rc = fspace < 0 || mspace < 0 || ft_h5_select_flat_range(fspace, ndim, dims, lo, hi);
    if (!rc) {
        herr_t h = writing ? H5Dwrite(d, mtype, mspace, fspace, f->dxpl, buf)
                           : H5Dread(d, mtype, mspace, fspace, f->dxpl, buf);
        rc = h < 0;
    }
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    return rc ? ft_fail(err, "%s: cannot %s %s elements [%llu, %llu)%s", f->path,
                        writing ? "write" : "read", name, (unsigned long long)lo,
                        (unsigned long long)hi,
                        writing ? " (disk full?)" : " (truncated or corrupt file?)")
              : 0;
}

size_t cv_chunk_elems(size_t bytes, size_t elem_bytes, uint64_t cols)
{
    size_t n = bytes / elem_bytes;
    if (n == 0)
        n = 1;
    if (cols > 0 && cols <= n)
        n = n / cols * cols;
    return n;
}

bool cv_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool cv_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int cv_copy_file(const char *src, const char *dst, ft_error *err)
{
    /* a FIFO or device as the source is refused, not waited on or copied forever; the
     * copy goes to DST.tmp, made new, and is renamed: a symlink planted at either name
     * is never written through, and a source equal to dst is not truncated first */
    int in, out;
    char tmp[4200];
    if (ft_input_open(src, "a tokenizer file", FT_INPUT_MAX_TOKENIZER, &in, NULL, err))
        return -1;
    if (ft_output_tmp_name(tmp, sizeof tmp, dst, err) ||
        ft_output_create_tmp(tmp, 0644, &out, err)) {
        close(in);
        return -1;
    }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = ft_fail(err, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (r == 0)
            break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = ft_fail(err, "%s: write failed: %s", tmp, strerror(errno));
                break;
            }
            off += w;
        }
        if (rc)
            break;
    }
    if (!rc && fsync(out) != 0)
        rc = ft_fail(err, "%s: fsync failed: %s", tmp, strerror(errno));
    close(in);
    if (close(out) != 0 && !rc)
        rc = ft_fail(err, "%s: close failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, dst) != 0)
        rc = ft_fail(err, "%s: cannot rename to %s: %s", tmp, dst, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}
