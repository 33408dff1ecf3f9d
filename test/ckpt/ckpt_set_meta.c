/* Test helper: ckpt_set_meta FILE KEY VALUE overwrites the integer attribute KEY of a
 * checkpoint's /meta group (or, when KEY starts with '/', of the file's root group, e.g.
 * a dataset's /vocab_size), so that tests can stand in for a long or a tampered run
 * (step 999,998 without training that long, a negative data position). */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_set_meta FILE KEY VALUE\n");
        return 2;
    }
    const int64_t value = strtoll(argv[3], NULL, 10);
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    const int at_root = argv[2][0] == '/';
    hid_t g = f < 0 ? -1 : H5Gopen2(f, at_root ? "/" : "/meta", H5P_DEFAULT);
    hid_t a = g < 0 ? -1 : H5Aopen(g, argv[2] + at_root, H5P_DEFAULT);
    const int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &value) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (g >= 0)
        H5Gclose(g);
    if (f >= 0)
        H5Fclose(f);
    if (!ok)
        fprintf(stderr, "ckpt_set_meta: cannot set /meta %s in %s\n", argv[2], argv[1]);
    return ok ? 0 : 1;
}
