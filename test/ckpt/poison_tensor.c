/* Test helper: poison_tensor FILE DATASET INDEX|all nan|inf|zero sets one element (or
 * every element) of an fp32 tensor of a checkpoint or weights file to NaN, +Inf or 0 and
 * updates the tensor's content_hash to match (doc/formats.md), so that the file stands for
 * one that a run wrote that way (weights files have no hash): only the finite check, not the hash check, can refuse it.
 * (A zero final norm and lm_head make a model whose loss is ln V with gradient 0: a
 * collapsed run.) */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/weights.h"

static float value_of(const char *s)
{
    return strcmp(s, "nan") == 0 ? NAN : strcmp(s, "inf") == 0 ? INFINITY : 0.0f;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "nan") && strcmp(argv[4], "inf") && strcmp(argv[4], "zero"))) {
        fprintf(stderr, "usage: poison_tensor FILE DATASET INDEX|all nan|inf|zero\n");
        return 2;
    }
    const int all = strcmp(argv[3], "all") == 0;
    const hsize_t index = all ? 0 : strtoull(argv[3], NULL, 10);
    const float bad = value_of(argv[4]);
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f < 0 ? -1 : H5Dopen2(f, argv[2], H5P_DEFAULT);
    hid_t t = d < 0 ? -1 : H5Dget_type(d);
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    int ok = t >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 4 && s >= 0;
    const hsize_t n = ok ? (hsize_t)H5Sget_simple_extent_npoints(s) : 0;
    float *v = ok ? malloc(n * sizeof *v) : NULL;
    ok = ok && v && index < n && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0;
    /* weights files carry no hash */
    const int hashed = ok && H5Aexists(d, "content_hash") > 0;
    hid_t a = hashed ? H5Aopen(d, "content_hash", H5P_DEFAULT) : -1;
    int64_t h = 0;
    ok = ok && (!hashed || (a >= 0 && H5Aread(a, H5T_NATIVE_INT64, &h) >= 0));
    if (ok) {
        uint64_t u = (uint64_t)h;
        for (hsize_t i = all ? 0 : index; i < (all ? n : index + 1); i++) {
            u -= ft_weights_hash_part(i, &v[i], 1, 4);
            v[i] = bad;
            u += ft_weights_hash_part(i, &v[i], 1, 4);
        }
        h = (int64_t)u;
        ok = H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 &&
             (!hashed || H5Awrite(a, H5T_NATIVE_INT64, &h) >= 0);
    }
    free(v);
    if (a >= 0)
        H5Aclose(a);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (d >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    if (!ok)
        fprintf(stderr, "poison_tensor: cannot set %s[%s] in %s (an fp32 tensor?)"
                        "\n", argv[2], argv[3], argv[1]);
    return ok ? 0 : 1;
}
