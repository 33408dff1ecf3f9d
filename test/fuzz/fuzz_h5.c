/* Structured HDF5 file edits for the fuzzers (fuzz_h5.h). */
#include "fuzz_h5.h"

#include <math.h>
#include <mpi.h>
#include <sanitizer/lsan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Integers that sit on the edges validation has to get right. */
static int64_t pick_int(fuzz_bytes *b)
{
    static const int64_t edge[] = {
        0, 1, -1, 2, 3, 7, 8, 9, 16, 17, 64, 255, 256, 65535, 0x7fffffff, 0x80000000LL,
        0xffffffffLL, 0x100000000LL, INT64_MAX, INT64_MIN, -2, 1LL << 40, -0x80000000LL,
    };
    uint8_t k = fuzz_u8(b);
    if (k < 200)
        return edge[k % (sizeof edge / sizeof edge[0])];
    return (int64_t)fuzz_u64(b);
}

static double pick_double(fuzz_bytes *b)
{
    static const double edge[] = { 0.0, 1.0, -1.0, 1e-5, 1e-6, 5e5, 1e300, -1e300, 0.5, 8.0 };
    uint8_t k = fuzz_u8(b);
    if (k < 10)
        return edge[k];
    if (k < 20)
        return k & 1 ? NAN : (k & 2 ? -INFINITY : INFINITY);
    uint64_t bits = fuzz_u64(b);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static const char *pick_name(fuzz_bytes *b, const char *const *list, int n, char *own, size_t cap)
{
    if (n == 0 || fuzz_u8(b) >= 240) { /* now and then a name the reader does not expect */
        fuzz_str(b, own, cap - 1);
        return own[0] ? own : "x";
    }
    return list[fuzz_pick(b, (uint32_t)n)];
}

static hid_t open_object(hid_t f, const char *name)
{
    if (strcmp(name, "/") != 0 && H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return -1;
    return H5Oopen(f, name, H5P_DEFAULT);
}

static void set_attr(hid_t f, const fuzz_h5_names *nm, fuzz_bytes *b)
{
    char own_obj[64], own_attr[64];
    const char *obj = fuzz_u8(b) & 1
                          ? pick_name(b, nm->objects, nm->n_objects, own_obj, sizeof own_obj)
                          : pick_name(b, nm->datasets, nm->n_datasets, own_obj, sizeof own_obj);
    const char *name = pick_name(b, nm->attrs, nm->n_attrs, own_attr, sizeof own_attr);
    hid_t o = open_object(f, obj);
    if (o < 0)
        return;
    if (H5Aexists(o, name) > 0)
        H5Adelete(o, name);
    hid_t type = -1, mem = -1, space = H5Screate(H5S_SCALAR);
    unsigned char value[64] = { 0 };
    char text[256];
    const char *vlen = text;
    const void *buf = value;
    switch (fuzz_pick(b, 10)) {
    case 0: { int64_t v = pick_int(b); memcpy(value, &v, 8); type = H5Tcopy(H5T_STD_I64LE); mem = H5Tcopy(H5T_NATIVE_INT64); break; }
    case 1: { int32_t v = (int32_t)pick_int(b); memcpy(value, &v, 4); type = H5Tcopy(H5T_STD_I32LE); mem = H5Tcopy(H5T_NATIVE_INT32); break; }
    case 2: { uint64_t v = (uint64_t)pick_int(b); memcpy(value, &v, 8); type = H5Tcopy(H5T_STD_U64LE); mem = H5Tcopy(H5T_NATIVE_UINT64); break; }
    case 3: { double v = pick_double(b); memcpy(value, &v, 8); type = H5Tcopy(H5T_IEEE_F64LE); mem = H5Tcopy(H5T_NATIVE_DOUBLE); break; }
    case 4: { float v = (float)pick_double(b); memcpy(value, &v, 4); type = H5Tcopy(H5T_IEEE_F32LE); mem = H5Tcopy(H5T_NATIVE_FLOAT); break; }
    case 5: { /* fixed-length string, possibly without a NUL */
        size_t n = fuzz_str(b, text, 200);
        type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, n ? n : 1);
        H5Tset_strpad(type, fuzz_u8(b) & 1 ? H5T_STR_NULLPAD : H5T_STR_NULLTERM);
        mem = H5Tcopy(type);
        buf = text;
        break; }
    case 6: /* variable-length string */
        fuzz_str(b, text, 200);
        type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, H5T_VARIABLE);
        mem = H5Tcopy(type);
        buf = &vlen;
        break;
    case 7: { /* an array of integers where a scalar is expected */
        hsize_t two = 2;
        H5Sclose(space);
        space = H5Screate_simple(1, &two, NULL);
        int64_t v[2] = { pick_int(b), pick_int(b) };
        memcpy(value, v, sizeof v);
        type = H5Tcopy(H5T_STD_I64LE);
        mem = H5Tcopy(H5T_NATIVE_INT64);
        break; }
    case 8: { uint8_t v = fuzz_u8(b); value[0] = v; type = H5Tcopy(H5T_STD_U8LE); mem = H5Tcopy(H5T_NATIVE_UINT8); break; }
    default: /* an empty dataspace */
        H5Sclose(space);
        space = H5Screate(H5S_NULL);
        type = H5Tcopy(H5T_STD_I64LE);
        mem = H5Tcopy(H5T_NATIVE_INT64);
        break;
    }
    hid_t a = H5Acreate2(o, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, mem, buf);
        H5Aclose(a);
    }
    H5Tclose(type);
    H5Tclose(mem);
    H5Sclose(space);
    H5Oclose(o);
}

static void delete_attr(hid_t f, const fuzz_h5_names *nm, fuzz_bytes *b)
{
    char own[64];
    const char *obj = nm->objects[fuzz_pick(b, (uint32_t)nm->n_objects)];
    const char *name = pick_name(b, nm->attrs, nm->n_attrs, own, sizeof own);
    hid_t o = open_object(f, obj);
    if (o < 0)
        return;
    if (H5Aexists(o, name) > 0)
        H5Adelete(o, name);
    H5Oclose(o);
}

static void delete_link(hid_t f, const fuzz_h5_names *nm, fuzz_bytes *b)
{
    const char *name = fuzz_u8(b) & 1 ? nm->objects[fuzz_pick(b, (uint32_t)nm->n_objects)]
                                      : nm->datasets[fuzz_pick(b, (uint32_t)nm->n_datasets)];
    if (strcmp(name, "/") != 0 && H5Lexists(f, name, H5P_DEFAULT) > 0)
        H5Ldelete(f, name, H5P_DEFAULT);
}

static hid_t pick_type(fuzz_bytes *b)
{
    const hid_t types[] = { H5T_STD_U32LE, H5T_STD_I32LE, H5T_STD_U8LE,   H5T_STD_I8LE,
                            H5T_IEEE_F32LE, H5T_STD_U16LE, H5T_STD_I16LE, H5T_IEEE_F64LE,
                            H5T_STD_I64LE, H5T_STD_U32BE, H5T_IEEE_F32BE };
    return types[fuzz_pick(b, sizeof types / sizeof types[0])];
}

/* Recreates a dataset with another rank, shape or type. Storage is allocated late and never
 * filled, so a huge shape costs nothing until something reads it. */
static void recreate_dataset(hid_t f, const fuzz_h5_names *nm, fuzz_bytes *b)
{
    const char *name = nm->datasets[fuzz_pick(b, (uint32_t)nm->n_datasets)];
    if (H5Lexists(f, name, H5P_DEFAULT) > 0)
        H5Ldelete(f, name, H5P_DEFAULT);
    int rank = (int)fuzz_pick(b, 4);
    hsize_t dims[3];
    for (int i = 0; i < rank; i++) {
        int64_t v = pick_int(b);
        dims[i] = v < 0 ? 0 : (hsize_t)v > (1ull << 40) ? (1ull << 40) : (hsize_t)v;
    }
    hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(f, name, pick_type(b), space, lcpl, dcpl, H5P_DEFAULT);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    H5Sclose(space);
}

/* Overwrites a small dataset with raw bytes from the input (any bit pattern: NaN, huge ids,
 * negative segments). */
static void rewrite_dataset(hid_t f, const fuzz_h5_names *nm, fuzz_bytes *b)
{
    const char *name = nm->datasets[fuzz_pick(b, (uint32_t)nm->n_datasets)];
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0)
        return;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0)
        return;
    hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    hssize_t n = H5Sget_select_npoints(space);
    size_t size = H5Tget_size(type);
    if (n > 0 && (size_t)n * size <= (1u << 20) && H5Tget_class(type) != H5T_STRING) {
        unsigned char *buf = malloc((size_t)n * size);
        uint8_t seed = fuzz_u8(b), step = fuzz_u8(b);
        for (size_t i = 0; buf && i < (size_t)n * size; i++)
            buf[i] = b->n ? b->p[i % b->n] ^ seed : (uint8_t)(seed + step * i);
        if (buf)
            H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        free(buf);
    }
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(d);
}

static int copy_file(const char *from, const char *to)
{
    static char *cached_name;
    static unsigned char *data;
    static size_t len;
    if (!cached_name || strcmp(cached_name, from) != 0) {
        FILE *in = fopen(from, "rb");
        if (!in)
            return -1;
        free(data);
        free(cached_name);
        cached_name = strdup(from);
        fseek(in, 0, SEEK_END);
        len = (size_t)ftell(in);
        rewind(in);
        data = malloc(len ? len : 1);
        if (!data || fread(data, 1, len, in) != len) {
            fclose(in);
            return -1;
        }
        fclose(in);
    }
    fuzz_write_file(strrchr(to, '/') + 1, data, len);
    return 0;
}

void fuzz_mpi_init(int *argc, char ***argv)
{
    __lsan_disable();
    MPI_Init(argc, argv);
    MPI_File fh;
    const char *path = fuzz_path("mpi-io-warm-up");
    if (MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                      &fh) != MPI_SUCCESS) {
        fprintf(stderr, "fuzz: MPI_File_open(%s) failed\n", path);
        abort();
    }
    const int word = 42;
    MPI_File_write_at_all(fh, 0, &word, 1, MPI_INT, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    remove(path);
    __lsan_enable();
}

int fuzz_h5_mutate(const char *base, const char *path, const fuzz_h5_names *nm, fuzz_bytes *in)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (copy_file(base, path))
        return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int n_ops = 1 + (int)fuzz_pick(in, 8);
    for (int i = 0; i < n_ops; i++) {
        switch (fuzz_pick(in, 6)) {
        case 0:
        case 1: set_attr(f, nm, in); break;
        case 2: delete_attr(f, nm, in); break;
        case 3: delete_link(f, nm, in); break;
        case 4: recreate_dataset(f, nm, in); break;
        default: rewrite_dataset(f, nm, in); break;
        }
    }
    return H5Fclose(f) < 0 ? -1 : 0;
}

void fuzz_h5_check_closed(const char *what)
{
    ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open > 0) {
        fprintf(stderr, "%s left %zd HDF5 objects open\n", what, open);
        abort();
    }
}
