/* Test tool: writes the /batch of an HF golden file (test/data/hf) as a dataset file,
 * so the command-line trainer can be checked against the golden loss. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/dataset.h"

static int read_all(hid_t f, const char *name, hid_t type, void *buf)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    int rc = d < 0 || H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0;
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hf_batch_to_dataset GOLDEN.h5 OUT.h5\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rc = 1;
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f < 0 ? -1 : H5Dopen2(f, "/batch/tokens", H5P_DEFAULT);
    if (d < 0) {
        fprintf(stderr, "%s: no /batch/tokens\n", argv[1]);
        MPI_Finalize();
        return 1;
    }
    hsize_t dims[2];
    hid_t s = H5Dget_space(d);
    H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    H5Dclose(d);
    size_t n = dims[0] * dims[1];
    uint32_t *tok = malloc(n * 4);
    uint8_t *mask = malloc(n);
    int32_t *seg = malloc(n * 4);
    int vocab = 0;
    hid_t g = H5Gopen2(f, "/config", H5P_DEFAULT);
    hid_t a = H5Aopen(g, "vocab_size", H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_INT, &vocab);
    H5Aclose(a);
    H5Gclose(g);
    if (!read_all(f, "/batch/tokens", H5T_NATIVE_UINT32, tok) &&
        !read_all(f, "/batch/loss_mask", H5T_NATIVE_UINT8, mask) &&
        !read_all(f, "/batch/segment", H5T_NATIVE_INT32, seg)) {
        ft_dataset_info info = { .rows = (int64_t)dims[0], .seq_len = (int)dims[1] - 1,
                                 .vocab_size = vocab, .bos_token_id = -1, .eos_token_id = -1,
                                 .pad_token_id = -1, .n_documents = (int64_t)dims[0] };
        for (size_t i = 0; i < n; i++)
            info.n_target_tokens += (i % dims[1]) != 0 && mask[i];
        snprintf(info.template_name, sizeof info.template_name, "hf-golden");
        ft_error err;
        rc = ft_dataset_write(argv[2], &info, tok, mask, seg, &err);
        if (rc)
            fprintf(stderr, "%s\n", err.msg);
    }
    free(tok);
    free(mask);
    free(seg);
    H5Fclose(f);
    MPI_Finalize();
    return rc ? 1 : 0;
}
