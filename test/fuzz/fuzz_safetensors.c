/* Fuzzer: a .safetensors file -> ft_st_open (header length, JSON header, dtypes, shapes,
 * offsets against the file size), with and without FT_ST_ANY_DTYPE, then a read of the
 * first bytes of every tensor it accepted and a lookup of each by name. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("model.safetensors", data, size);
    for (unsigned flags = 0; flags <= FT_ST_ANY_DTYPE; flags += FT_ST_ANY_DTYPE) {
        ft_st_file f;
        ft_error err;
        if (ft_st_open(&f, path, flags, &err))
            continue;
        for (int i = 0; i < f.n_tensors; i++) {
            const ft_st_tensor *t = &f.tensors[i];
            if (ft_st_find(&f, t->name) == NULL) {
                fprintf(stderr, "tensor '%s' accepted but not found by name\n", t->name);
                abort();
            }
            if (t->end > f.file_size - f.data_start || t->begin > t->end) {
                fprintf(stderr, "tensor '%s' accepted with bytes outside the file\n", t->name);
                abort();
            }
            unsigned char buf[64];
            uint64_t n = ft_st_tensor_bytes(t) < sizeof buf ? ft_st_tensor_bytes(t) : sizeof buf;
            (void)ft_st_read(&f, t, 0, buf, (size_t)n, &err);
            (void)ft_st_tensor_numel(t);
        }
        for (int i = 0; i < f.n_meta; i++)
            (void)ft_st_meta(&f, f.meta_keys[i]);
        ft_st_close(&f);
    }
    return 0;
}
